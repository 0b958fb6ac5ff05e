package escape

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(fileAttacks) }

// fileAttacks point send_file at what the group must not send: a symlink
// (last component or a parent) to the host's files or another group's, a
// FIFO that would hang a plain open, a directory, a file over the cap,
// another group's folder by path, and another chat. A file the host sent
// that holds /etc/passwd or another group's secret is an escape; so is any
// file reaching a chat other than the group's own.
func fileAttacks() []attack {
	sendFile := func(path string, extra ...any) string {
		in := map[string]any{"path": path}
		for i := 0; i+1 < len(extra); i += 2 {
			in[extra[i].(string)] = extra[i+1]
		}
		return tool("send_file", in)
	}
	// refused asks for every call of the attack to be refused: as many
	// "denied:" as calls, and nothing sent anywhere.
	refused := func(calls int) func(t *testing.T, e *env, out string) []string {
		return func(t *testing.T, e *env, out string) []string {
			ev := leakedFiles(e)
			if n := len(e.h.TG.FilesTo(e.chat)); n > 0 {
				ev = append(ev, fmt.Sprintf("%d files sent to the attacking group's chat", n))
			}
			if n := strings.Count(out, "denied: "); n < calls {
				ev = append(ev, inconclusive+fmt.Sprintf("only %d of %d send_file calls were refused", n, calls))
			}
			return ev
		}
	}
	return []attack{
		{name: "sendfile-symlink-passwd", msg: func(e *env) string {
			return strings.Join([]string{
				bash("ln -s /etc/passwd /workspace/group/passwd.txt && ln -s " + filepath.Join(e.h.Dir, "groups/other/notes.txt") + " /workspace/group/notes.txt && echo LINKED"),
				sendFile("/workspace/group/passwd.txt"),
				sendFile("/workspace/group/notes.txt"),
			}, "\n")
		}, want: []string{"LINKED", "symlink"}, check: refused(2)},

		{name: "sendfile-symlink-parent", msg: func(e *env) string {
			return strings.Join([]string{
				bash("ln -s /etc /workspace/group/etc && ln -s " + filepath.Join(e.h.Dir, "groups/other") + " /workspace/group/other && mkdir -p /workspace/group/d && ln -s /etc /workspace/group/d/up && echo LINKED"),
				sendFile("/workspace/group/etc/passwd"),
				sendFile("/workspace/group/other/notes.txt"),
				sendFile("/workspace/group/d/up/passwd"),
			}, "\n")
		}, want: []string{"LINKED", "symlink"}, check: refused(3)},

		// A FIFO the host planted (as a backend writing through to the
		// disk leaves one the sandbox makes), and one the sandbox makes:
		// under gVisor that one lives in gVisor's own kernel only, and the
		// host finds no file there.
		{name: "sendfile-fifo", setup: func(t *testing.T, e *env) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(e.groupDir, "hostpipe"), 0o644))
		}, msg: func(e *env) string {
			return strings.Join([]string{
				bash("mkfifo /workspace/group/pipe && echo FIFO-MADE"),
				sendFile("/workspace/group/hostpipe"),
				sendFile("/workspace/group/pipe"),
			}, "\n")
		}, want: []string{"FIFO-MADE", "/workspace/group/hostpipe is not a regular file"}, check: func(t *testing.T, e *env, out string) []string {
			ev := leakedFiles(e)
			if n := len(e.h.TG.FilesTo(e.chat)); n > 0 {
				ev = append(ev, fmt.Sprintf("%d files sent to the attacking group's chat", n))
			}
			fi, err := os.Lstat(filepath.Join(e.groupDir, "pipe"))
			switch {
			case err == nil && fi.Mode()&os.ModeNamedPipe == 0:
				ev = append(ev, inconclusive+"the sandbox's pipe is on the host as "+fi.Mode().String())
			case err == nil && !strings.Contains(out, "/workspace/group/pipe is not a regular file"):
				ev = append(ev, inconclusive+"the sandbox's FIFO, on the host's disk, was not refused as one")
			case err != nil && !strings.Contains(out, "no file at /workspace/group/pipe"):
				ev = append(ev, inconclusive+"the sandbox's FIFO is not on the host's disk, and the host did not say so")
			case err != nil:
				t.Logf("the FIFO the sandbox made never reached the host's disk: %v", err)
			}
			return ev
		}},

		{name: "sendfile-directory", msg: func(e *env) string {
			return strings.Join([]string{
				sendFile("/workspace/group"),
				sendFile("/workspace/group/"),
				sendFile("/workspace/global"),
			}, "\n")
		}, want: []string{"not a regular file"}, check: refused(3)},

		{name: "sendfile-too-big", msg: func(e *env) string {
			// Sparse: the disk quota does not stop it first.
			return strings.Join([]string{
				bash("truncate -s 51M /workspace/group/big.bin && echo BIG-MADE"),
				sendFile("/workspace/group/big.bin"),
			}, "\n")
		}, want: []string{"BIG-MADE", "larger than 50 MB"}, check: refused(1)},

		{name: "sendfile-other-group", msg: func(e *env) string {
			return strings.Join([]string{
				sendFile("/workspace/group/../other/notes.txt"),
				sendFile("/workspace/other/notes.txt"),
				sendFile(filepath.Join(e.h.Dir, "groups/other/notes.txt")),
				sendFile("/workspace/extra/../../other/notes.txt"),
				sendFile("/workspace/extra/nomount/notes.txt"),
				sendFile("/etc/passwd"),
				sendFile("../other/notes.txt"),
			}, "\n")
		}, want: []string{"denied: "}, check: refused(7)},

		{name: "sendfile-other-chat", msg: func(e *env) string {
			return strings.Join([]string{
				bash("echo OWN-FILE > /workspace/group/own.txt && echo OWN-MADE"),
				sendFile("/workspace/group/own.txt", "chat_id", harness.OwnerID),
				sendFile("/workspace/group/own.txt", "chat_id", -100999000),
				bash(`./pwn http POST /ipc/send_file '{"path":"/workspace/group/own.txt","group":"main","chat_id":` + fmt.Sprint(harness.OwnerID) + `}'; echo FORGE-DONE`),
			}, "\n")
		}, want: []string{"OWN-MADE", "may only send", "FORGE-DONE"}, check: refused(2)},

		// What the sandbox itself cannot read, in a read-only extra mount:
		// a root-only file, and a file in a root-only directory whose name
		// it guesses. The host opens send_file's path with the sandbox
		// user's rights, so neither is sent.
		{name: "sendfile-unreadable", mount: true, setup: func(t *testing.T, e *env) {
			dir := filepath.Join(e.h.Outside, "shared", "unread-"+e.folder)
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "private"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(unreadable+"-FILE\n"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "private", "inner.txt"), []byte(unreadable+"-INNER\n"), 0o644))
			require.NoError(t, os.Chmod(filepath.Join(dir, "private"), 0o700))
			e.h.For(t).CLI("groups", "mount", "add", e.folder, dir, "unread") // read-only: nonMainReadOnly
		}, msg: func(e *env) string {
			return strings.Join([]string{
				bash(lines(try("UNREAD-FILE", "cat /workspace/extra/unread/secret.txt"),
					try("UNREAD-INNER", "cat /workspace/extra/unread/private/inner.txt"))),
				sendFile("/workspace/extra/unread/secret.txt"),
				sendFile("/workspace/extra/unread/private/inner.txt"),
			}, "\n")
		}, want: []string{"UNREAD-FILE=HELD", "UNREAD-INNER=HELD", "cannot be read by the sandbox"}, bad: []string{unreadable},
			check: func(t *testing.T, e *env, out string) []string {
				ev := refused(2)(t, e, out)
				for _, f := range e.h.TG.SentFiles() {
					if bytes.Contains(f.Data, []byte(unreadable)) {
						ev = append(ev, fmt.Sprintf("a file the sandbox cannot read was sent to chat %d: %s", f.ChatID, f.Name))
					}
				}
				return ev
			}},

		inboxAttack("inbox-symlink-etc", func(e *env) string { return "/etc" }),
		inboxAttack("inbox-symlink-other-group", func(e *env) string { return filepath.Join(e.h.Dir, "groups", "other") }),
		filesStarveOwner(),

		// A file swapped for a symlink to /etc/passwd as fast as the sandbox
		// can while the host opens it: a check-then-open would lose the race
		// now and then; openat2 refuses the link at the moment of the open.
		{name: "sendfile-swap-race", msg: func(e *env) string {
			loop := "cd /workspace/group && end=$(($(date +%s)+12)); while [ $(date +%s) -lt $end ]; do " +
				"echo SAFE > sw.tmp; mv -f sw.tmp sw; ln -sfn /etc/passwd sw.lnk; mv -fT sw.lnk sw; done"
			calls := []string{bash("setsid sh -c '" + loop + "' >/dev/null 2>&1 < /dev/null & sleep 1; echo RACE-STARTED")}
			for range 12 {
				calls = append(calls, sendFile("/workspace/group/sw"))
			}
			return strings.Join(calls, "\n")
		}, want: []string{"RACE-STARTED"}, check: func(t *testing.T, e *env, out string) []string {
			ev := leakedFiles(e)
			for _, f := range e.h.TG.FilesTo(e.chat) {
				if !bytes.Equal(f.Data, []byte("SAFE\n")) {
					ev = append(ev, fmt.Sprintf("sent %q, not the file the agent wrote", clip(string(f.Data), 80)))
				}
			}
			return ev
		}},
	}
}

// unreadable marks the content of files a sandbox cannot read.
const unreadable = "UNREADABLE-BY-THE-SANDBOX"

// inboxAttack plants a symlink where the host writes files users send
// (inbox/), then a member sends a file: it must not land at the link's
// target, and the message must still reach the agent, with a note.
func inboxAttack(name string, target func(e *env) string) attack {
	return attack{name: name, msg: func(e *env) string {
		return bash("cd /workspace/group && rm -rf inbox && ln -s " + target(e) + " inbox && echo PLANTED")
	}, want: []string{"PLANTED"}, check: func(t *testing.T, e *env, _ string) []string {
		before := len(e.h.TG.SentTo(e.chat))
		ref := e.h.TG.AddFile([]byte("INBOX-PAYLOAD"))
		e.h.Say(e.chat, "supergroup", name, harness.MemberID, "@Andy INBOX-CHECK", faketg.Attach("document", ref, "x.pdf"))
		if !assert.Eventually(t, func() bool { return len(e.h.TG.SentTo(e.chat)) > before }, 60*time.Second, 50*time.Millisecond) {
			return []string{inconclusive + "no answer to the file"}
		}
		var ev []string
		if hits := harness.GrepFiles(t, "/etc", []byte("INBOX-PAYLOAD")); len(hits) > 0 {
			ev = append(ev, fmt.Sprintf("the file landed in /etc: %v", hits))
		}
		if hits := harness.GrepFiles(t, filepath.Join(e.h.Dir, "groups", "other"), []byte("INBOX-PAYLOAD")); len(hits) > 0 {
			ev = append(ev, fmt.Sprintf("the file landed in another group's folder: %v", hits))
		}
		answer := strings.Join(harness.Texts(e.h.TG.SentTo(e.chat)[before:]), "\n")
		if !strings.Contains(answer, "INBOX-CHECK") || !strings.Contains(answer, "could not store") {
			ev = append(ev, inconclusive+"the answer does not show the message with a note: "+clip(answer, 300))
		}
		return ev
	}}
}

// filesStarveOwner: a group sends more large files than the host fetches at
// once (held here: downloads that do not finish), then the owner sends one.
// The owner's messages and file must not wait for the group's downloads:
// the owner is answered, with the file read in the sandbox, while every one
// of the group's downloads is still running.
func filesStarveOwner() attack {
	const name = "files-starve-owner"
	return attack{name: name, setup: func(t *testing.T, e *env) {
		for i := range 4 {
			ref := e.h.TG.AddFile([]byte(fmt.Sprintf("GROUP-FILE-%d", i)))
			t.Cleanup(e.h.TG.HoldDownload(ref))
			e.h.Say(e.chat, "supergroup", name, harness.MemberID, fmt.Sprintf("@Andy file %d", i), faketg.Attach("document", ref, "big.bin"))
		}
	}, check: func(t *testing.T, e *env, _ string) []string {
		ref := e.h.TG.AddFile([]byte("OWNER-FILE-FETCHED"))
		n := len(e.h.TG.SentTo(harness.OwnerID))
		e.h.TG.PushMessage(harness.OwnerID, "private", "", faketg.User{ID: harness.OwnerID, FirstName: "Owner"},
			bash("cat /workspace/group/inbox/*.txt"), faketg.Attach("document", ref, "owner.txt"))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		sent, err := e.h.TG.WaitSent(ctx, harness.OwnerID, n+1)
		var ev []string
		switch {
		case err != nil:
			ev = append(ev, "the owner's file was not answered while the group's downloads ran")
		case !strings.Contains(strings.Join(harness.Texts(sent[n:]), "\n"), "OWNER-FILE-FETCHED"):
			ev = append(ev, "the owner's run did not find the owner's file: "+clip(strings.Join(harness.Texts(sent[n:]), "\n"), 300))
		}
		if len(e.h.TG.SentTo(e.chat)) > 0 {
			ev = append(ev, inconclusive+"the group was answered: its downloads were not held")
		}
		return ev
	}}
}

// leakedFiles is the evidence in every file the host sent: /etc/passwd,
// another group's secret, a planted credential, or any file to the owner.
func leakedFiles(e *env) []string {
	var ev []string
	for _, f := range e.h.TG.SentFiles() {
		for _, bad := range []string{"root:x:0:0", "OTHER-GROUP-SECRET", harness.SecretSSH, harness.APIKey, harness.BotToken} {
			if bytes.Contains(f.Data, []byte(bad)) {
				ev = append(ev, fmt.Sprintf("a file holding %q was sent to chat %d", bad, f.ChatID))
			}
		}
		if f.ChatID == harness.OwnerID {
			ev = append(ev, fmt.Sprintf("a file (%s) reached the owner's chat", f.Name))
		}
	}
	return ev
}
