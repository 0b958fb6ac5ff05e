package escape

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(seccompAttacks) }

// The key one group's run plants for a later run of another to find.
const (
	plantedDesc    = "clawpen-e2e-planted-key"
	plantedPayload = "PLANTED-BY-ANOTHER-GROUP"
)

// seccompAttacks are the kernel interfaces a sandbox must not reach: the
// keyrings (the host's, and one shared with other groups), the i386 ABI
// around the filter, other processes' memory, and kernel attack surface.
func seccompAttacks() []attack {
	return []attack{
		{name: "keyring-host-key", setup: func(t *testing.T, e *env) {
			require.True(t, e.h.KeyPlanted, "the harness could not plant a key in serve's session keyring")
		}, msg: func(e *env) string {
			return bash("./pwn keyring-read " + harness.HostKeyDesc)
		}, want: []string{"KEYRING-SEARCH=HELD", "PROC-KEYS=HELD"}, bad: []string{harness.SecretKeyring}},

		{name: "keyring-cross-group", setup: func(t *testing.T, e *env) {
			// Another group's run plants a key readable by anyone who can
			// see it; this group's run, later, looks for it.
			h := e.h.For(t)
			chat := e.chat - 6000
			folder := e.folder + "-planter"
			h.CLI("groups", "add", strconv.FormatInt(chat, 10), folder, "planter")
			copyExec(t, pwnBin, filepath.Join(h.Dir, "groups", folder, "pwn"))
			h.Say(chat, "supergroup", "planter", harness.MemberID, "@Andy\n"+bash("./pwn keyring-plant "+plantedDesc+" "+plantedPayload))
			h.WaitFor(chat, "PLANT-DONE")
		}, msg: func(e *env) string {
			return bash("./pwn keyring-read " + plantedDesc)
		}, want: []string{"KEYRING-SEARCH=HELD", "PROC-KEYS=HELD"}, bad: []string{plantedPayload}},

		{name: "keyctl-add-request-key", msg: func(e *env) string {
			return bash("./pwn keyctl")
		}, want: []string{"KEYCTL=HELD", "ADD-KEY=HELD", "REQUEST-KEY=HELD"}},

		{name: "i386-int80", msg: func(e *env) string {
			return bash("./pwn int80 " + harness.HostKeyDesc)
		}, want: []string{"INT80-KEYCTL=HELD", "INT80-KEYSEARCH=HELD", "INT80-SOCKET-VSOCK=HELD", "INT80-CLONE-NEWUSER=HELD"},
			bad: []string{harness.SecretKeyring}},

		{name: "ptrace-sibling", msg: func(e *env) string {
			// A sibling of pwn (both children of this shell), and the
			// agent that runs the shell.
			return bash(lines("sleep 30 & S=$!", "./pwn trace SIBLING $S", "./pwn trace AGENT $PPID", "kill $S"))
		}, want: []string{"PTRACE-SIBLING=HELD", "VMREAD-SIBLING=HELD", "PIDFD-GETFD-SIBLING=HELD",
			"PTRACE-AGENT=HELD", "VMREAD-AGENT=HELD", "PIDFD-GETFD-AGENT=HELD"}},

		{name: "bpf", msg: func(e *env) string { return bash("./pwn bpf") }, want: []string{"BPF=HELD"}},

		{name: "perf-event-open", msg: func(e *env) string { return bash("./pwn perf") }, want: []string{"PERF-EVENT-OPEN=HELD"}},

		{name: "userfaultfd", msg: func(e *env) string { return bash("./pwn userfaultfd") }, want: []string{"USERFAULTFD=HELD"}},

		{name: "io-uring", msg: func(e *env) string { return bash("./pwn io-uring") }, want: []string{"IO-URING=HELD"}},

		{name: "vsock-alg-sockets", msg: func(e *env) string { return bash("./pwn sockets") }, want: []string{"SOCKET-VSOCK=HELD", "SOCKET-ALG=HELD"}},

		{name: "new-mount-api", msg: func(e *env) string { return bash("./pwn newmount") }, want: []string{"FSOPEN=HELD", "OPEN-TREE=HELD"}},

		{name: "personality-no-aslr", msg: func(e *env) string { return bash("./pwn personality") }, want: []string{"PERSONALITY-NO-ASLR=HELD"}},
	}
}
