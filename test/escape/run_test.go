package escape

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// What a hostile command started with `clawpen run <folder>` could try: it
// holds a terminal (under a pty) and the group's host socket, and runs
// without serve in between. Each row records its outcome in the suite's
// table as run-<name>.
func TestRunEscape(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	toolDir := filepath.Join(h.Home, ".config/clawpen/tools")
	require.NoError(t, os.MkdirAll(toolDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(toolDir, "mainonly.md"),
		[]byte("---\nname: mainonly\ndescription: main only\ncommand: [/bin/echo, MAIN-ONLY-RAN]\n---\nMain's.\n"), 0o600))
	h.RegisterGroup(t, "family")
	groupDir := filepath.Join(h.Dir, "groups", "family")
	copyExec(t, pwnBin, filepath.Join(groupDir, "pwn"))

	rows := []struct {
		name string
		tty  bool
		cmd  string
		// want must all appear; bad must not (with the planted secrets).
		want, bad []string
		check     func(t *testing.T) []string
	}{
		// TIOCSTI on the pty it was given, to type into the owner's shell.
		{name: "tiocsti-pty", tty: true,
			cmd:  lines(`test -t 0 && echo STDIN-IS-A-T""TY`, "./pwn tiocsti", "./pwn tioclinux", `echo PTY-D""ONE`),
			want: []string{"STDIN-IS-A-TTY", "TIOCSTI-stdin=HELD", "TIOCSTI-stdout=HELD", "TIOCLINUX-stdin=HELD", "PTY-DONE"}},
		// The host's environment: the CLI's own holds the keys and token.
		{name: "host-env",
			cmd:  lines("env", "cat /proc/1/environ | tr '\\0' '\\n'", "cat /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'", "echo ENV-DONE"),
			want: []string{"ENV-DONE", "HOME=/home/agent"},
			bad:  []string{harness.APIKey, harness.BotToken, "TELEGRAM_", "ANTHROPIC_", "CLAWPEN_AGENT_BIN", "CLAWPEN_SANDBOX=", "CLAWPEN_OWNER_ID", h.Home}},
		// The host socket, acting as another group: main's tool, main's
		// chat, a task for main, another invocation's socket.
		{name: "socket-as-other-group",
			cmd: lines(
				"./pwn http POST /ipc/host_tool "+shq(`{"name":"mainonly","args":{}}`),
				"./pwn http POST /ipc/send_message "+shq(jsonOf(map[string]any{"group": "main", "chat_id": harness.OwnerID, "text": "RUN-FORGED-1"})),
				"./pwn http POST /ipc/send_message "+shq(jsonOf(map[string]any{"chat_id": harness.OwnerID, "text": "RUN-FORGED-2"})),
				"./pwn http POST /ipc/schedule_task "+shq(jsonOf(map[string]any{"group": "main", "prompt": "RUN-FORGED-TASK", "schedule_type": "interval", "schedule_value": "1h"})),
				// Listed by the shell's globs: coreutils ls fails on
				// everything under gVisor 2022-12-19 (statx flags refused).
				"echo /run/clawpen/* /run/clawpen/.[!.]*", "echo "+filepath.Join(h.Dir, "data", "sockets")+"/*", "echo SOCK-DONE"),
			want: []string{"SOCK-DONE", "denied", "host.sock"},
			bad:  []string{"MAIN-ONLY-RAN", "HTTP/1.1 200"},
			check: func(t *testing.T) []string {
				var ev []string
				for _, s := range harness.Texts(h.TG.SentTo(harness.OwnerID)) {
					if strings.Contains(s, "RUN-FORGED") {
						ev = append(ev, "delivered to main: "+s)
					}
				}
				for _, tk := range h.For(t).Tasks() {
					if strings.Contains(tk.Prompt, "RUN-FORGED") {
						ev = append(ev, fmt.Sprintf("task scheduled: %+v", tk))
					}
				}
				return ev
			}},
		// The owner's own secrets and the other groups, by host path.
		{name: "read-host",
			cmd: lines(try("SSH-HOSTPATH", "cat "+filepath.Join(h.Home, ".ssh/id_rsa")), try("SSH-HOME", "cat ~/.ssh/id_rsa"),
				try("MAIN-FOLDER", "test -d "+filepath.Join(h.Dir, "groups", "main")), try("DB", "cat "+filepath.Join(h.Dir, "data", "clawpen.db")),
				"echo READ-DONE"),
			want: []string{"SSH-HOSTPATH=HELD", "SSH-HOME=HELD", "MAIN-FOLDER=HELD", "DB=HELD", "READ-DONE"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			name := "run-" + r.name
			results.set(name, unclear, "did not finish")
			var out string
			if r.tty {
				out = runUnderPTY(t, h, "family", r.cmd+"; exit\n")
			} else {
				out, _ = h.RunCLI("run", "family", "/bin/sh", "-c", r.cmd)
			}
			out = withoutHostLog(out)
			t.Logf("%s:\n%s", name, clip(out, 4000))
			judge(t, name, out, r.bad, r.want, r.check, nil)
		})
	}
	assert.Contains(t, h.AuditLog(), "family run allow")
}

// judge records a row's outcome from its output: escaped when the output
// holds a bad marker (or the planted secret, or =BREACH) or check finds
// evidence; inconclusive when doubt (may be nil) gives a reason or a held
// marker of want is missing; blocked otherwise.
func judge(t *testing.T, name, out string, bad, want []string, check func(*testing.T) []string, doubt func() string) {
	t.Helper()
	var evidence []string
	for _, b := range append(bad, harness.SecretSSH, breach) {
		if strings.Contains(out, b) {
			evidence = append(evidence, "output holds "+b)
		}
	}
	if check != nil {
		evidence = append(evidence, check(t)...)
	}
	if len(evidence) > 0 {
		results.set(name, escaped, strings.Join(evidence, "; "))
		t.Errorf("%s escaped: %s", name, strings.Join(evidence, "; "))
		return
	}
	if doubt != nil {
		if why := doubt(); why != "" {
			results.set(name, unclear, why)
			t.Errorf("%s: %s", name, why)
			return
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			results.set(name, unclear, "missing "+w)
			t.Errorf("%s: the held evidence %q is missing", name, w)
			return
		}
	}
	results.set(name, blocked, "")
}

// runUnderPTY runs a shell by `clawpen run folder` from a terminal, types
// input into it and returns what the terminal showed.
func runUnderPTY(t *testing.T, h *harness.Host, folder, input string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(harness.BinDir(), "clawpen"), "run", folder, "/bin/sh")
	cmd.Dir, cmd.Env = h.Dir, h.Env
	tty, err := pty.Start(cmd)
	require.NoError(t, err)
	defer tty.Close()
	screen := harness.NewLineLog()
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(screen, tty) }()
	_, err = tty.WriteString(input)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(harness.Wait):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("the run under a terminal did not end")
	}
	select {
	case <-copied:
	case <-time.After(2 * time.Second): // the terminal's last bytes
	}
	return screen.String()
}

// withoutHostLog drops the CLI's own log lines (CLAWPEN_DEBUG is on): they
// are the host's, not what the command printed.
func withoutHostLog(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimLeft(l, "\r"), "time=") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }
