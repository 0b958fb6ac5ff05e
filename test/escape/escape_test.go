package escape

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/test/harness"
)

// Markers the sandbox prints: NAME=HELD when stopped, NAME=BREACH when not.
const (
	held   = "=HELD"
	breach = "=BREACH"
	// refusedText is what a group is told when the host gave up on a run.
	refusedText = "could not answer"
)

// env is what an attack needs to know about its host and group.
type env struct {
	h        *harness.Host
	folder   string
	chat     int64
	groupDir string // host path of groups/<folder>
	hostPID  int    // the serve process, as the host sees it
	ports    []string
	sockets  []string // sibling invocation sockets seen on the host
	accepted chan string
}

// attack is one row of the table.
type attack struct {
	name string
	// mount: needs the mount CLI (an error there fails the attack).
	mount bool
	// setup prepares the host side before the trigger.
	setup func(t *testing.T, e *env)
	// msg is the triggered message after "@Andy\n": TOOL directives. Empty
	// for host-side-only attacks.
	msg func(e *env) string
	// want must all appear in the sandbox's answer (the "held" evidence);
	// bad must not (besides the planted secrets and "=BREACH").
	want, bad []string
	// refusedOK: the host refusing or failing the run counts as blocked;
	// mustRefuse: only that counts.
	refusedOK, mustRefuse bool
	// limitOK: a run the host failed because the sandbox reached its
	// memory or process limit (the host's log and its notice to the group
	// both say so) counts as blocked: the limit held. gVisor's sandbox is
	// one cgroup with its kernel in it, which the limit ends as a whole.
	limitOK bool
	// leaks: the attack hands the sandbox a secret of the host's on
	// purpose, to see it stopped on its way out; elsewhere the leak
	// guard's finds are evidence (the sandbox held a secret, which the
	// guard then hid from the answer).
	leaks bool
	// check looks at the host after the attack; it returns escape evidence.
	check func(t *testing.T, e *env, out string) []string
	wait  time.Duration
	// ownKernel: only a kernel of its own (gVisor) holds it; on a backend
	// sharing the host's kernel the missing "held" evidence is recorded as
	// hostKernel, not failed (kernel_test.go). Escape evidence still fails.
	ownKernel bool
}

// bash is a TOOL directive running cmd in the sandbox.
func bash(cmd string, timeoutS ...int) string {
	in := map[string]any{"command": cmd}
	if len(timeoutS) > 0 {
		in["timeout_s"] = timeoutS[0]
	}
	b, _ := json.Marshal(in)
	return "TOOL bash " + string(b)
}

// tool is any TOOL directive.
func tool(name string, in map[string]any) string {
	b, _ := json.Marshal(in)
	return "TOOL " + name + " " + string(b)
}

// try prints NAME=HELD when cmd fails, NAME=BREACH when it succeeds.
func try(name, cmd string) string {
	return fmt.Sprintf("{ %s ; } >/dev/null 2>&1 && echo %s%s || echo %s%s", cmd, name, breach, name, held)
}

// split writes s so that it is not literally in the command (the command is
// kept in the agent's transcript, which a grep over /home would find).
func split(s string) string { return "'" + s[:len(s)/2] + "''" + s[len(s)/2:] + "'" }

func lines(ls ...string) string { return strings.Join(ls, "; ") }

// osDirs are find(1) tests for the host's own system directories, which a
// search of the sandbox's view skips: read-only binds of the host's /usr
// (and its merged-/usr aliases), the same on every backend, holding none
// of the host's data dir (the suite's is under /tmp). Walking them through
// gVisor's gofer takes over a minute, past a tool call's time.
const osDirs = "-path /usr -o -path /bin -o -path /sbin -o -path '/lib*'"

// attackSets are the attack tables, one per file (each registers itself in
// init), run in registration order.
var attackSets []func() []attack

func register(set func() []attack) { attackSets = append(attackSets, set) }

func attacks() []attack {
	var all []attack
	for _, set := range attackSets {
		all = append(all, set()...)
	}
	return all
}

func init() { register(coreAttacks) }

// coreAttacks are the first suite: secrets, other groups, the host socket,
// privileges.
func coreAttacks() []attack {
	secretGrep := func(prefix string, dirs ...string) string {
		return fmt.Sprintf("timeout 12 grep -rls -e %s -e %s -e %s -e %s -e %s %s 2>/dev/null | sed 's/^/%s/'",
			split("e2e-SECRET"), split("e2e-TOKEN"), split("OTHER-GROUP-SECRET"), split("OTHER-SESSION-SECRET"), split(harness.SecretSSH),
			strings.Join(dirs, " "), prefix)
	}
	return []attack{
		{name: "read-ssh-key", msg: func(e *env) string {
			return bash(lines(
				try("SSH-HOSTPATH", "cat "+filepath.Join(e.h.Home, ".ssh/id_rsa")),
				try("SSH-HOME", "cat ~/.ssh/id_rsa"),
				try("SSH-ROOT", "cat /root/.ssh/id_rsa"),
				"cat "+filepath.Join(e.h.Home, ".ssh/id_rsa")+" 2>&1"))
		}, want: []string{"SSH-HOSTPATH=HELD", "SSH-HOME=HELD", "SSH-ROOT=HELD"}},

		{name: "read-aws-credentials", msg: func(e *env) string {
			return bash(lines(
				try("AWS-HOSTPATH", "cat "+filepath.Join(e.h.Home, ".aws/credentials")),
				try("AWS-HOME", "cat ~/.aws/credentials"),
				"cat "+filepath.Join(e.h.Home, ".aws/credentials")+" 2>&1"))
		}, want: []string{"AWS-HOSTPATH=HELD", "AWS-HOME=HELD"}},

		{name: "read-allowlist", msg: func(e *env) string {
			p := filepath.Join(e.h.Home, ".config/clawpen/mount-allowlist.json")
			return bash(lines(try("ALLOWLIST", "cat "+p), try("ALLOWLIST-HOME", "cat ~/.config/clawpen/mount-allowlist.json"), "cat "+p+" 2>&1"))
		}, want: []string{"ALLOWLIST=HELD", "ALLOWLIST-HOME=HELD"}},

		{name: "read-database", msg: func(e *env) string {
			return bash(lines(
				try("DB-HOSTPATH", "cat "+filepath.Join(e.h.Dir, "data/clawpen.db")),
				"find / \\( -path /proc -o -path /sys -o -path /dev -o "+osDirs+" \\) -prune -o -name 'clawpen.db*' -print 2>/dev/null | sed 's/^/DBFILE-AT:/'",
				"echo DBSEARCH-DONE"), 15)
		}, want: []string{"DB-HOSTPATH=HELD", "DBSEARCH-DONE"}, bad: []string{"DBFILE-AT:"}},

		{name: "read-other-group", msg: func(e *env) string {
			return bash(lines(
				try("OTHER-FOLDER", "cat "+filepath.Join(e.h.Dir, "groups/other/notes.txt")),
				try("OTHER-RELATIVE", "cat /workspace/../other/notes.txt || cat /workspace/group/../other/notes.txt"),
				try("OTHER-SESSION", "cat "+filepath.Join(e.h.Dir, "data/sessions/other/transcript.jsonl")),
				try("OTHER-SESSION-REL", "cat /home/agent/../other/transcript.jsonl"),
				"ls /home /workspace 2>&1",
				secretGrep("LEAKFILE:", "/workspace", "/home", "/tmp", "/run", "/opt"),
				"echo OTHERSEARCH-DONE"), 15)
		}, want: []string{"OTHER-FOLDER=HELD", "OTHER-RELATIVE=HELD", "OTHER-SESSION=HELD", "OTHER-SESSION-REL=HELD", "OTHERSEARCH-DONE"},
			bad: []string{"LEAKFILE:"}},

		{name: "proc-environ", msg: func(e *env) string {
			return bash(lines(
				"for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done | sort -u",
				"for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = clawpen ] && echo HOSTPROC-SEEN:${p#/proc/}; done; true",
				try("HOST-PID-ENVIRON", fmt.Sprintf("grep -q TELEGRAM /proc/%d/environ", e.hostPID)),
				"echo PROCENV-DONE"))
		}, want: []string{"PROCENV-DONE", "HOST-PID-ENVIRON=HELD"}, bad: []string{"HOSTPROC-SEEN:", "TELEGRAM_", "ANTHROPIC_API_KEY"}},

		{name: "find-credentials", msg: func(e *env) string {
			return bash(lines(
				"env | grep -i -e key -e token -e secret | sed 's/^/ENVVAR:/'",
				secretGrep("KEYFILE:", "/workspace", "/home", "/tmp", "/run", "/etc", "/opt", "/proc/self/environ", "/proc/1/environ"),
				"timeout 10 grep -rls -e "+split("e2e-SECRET")+" -e "+split("e2e-TOKEN")+" /proc/self/ 2>/dev/null | grep -v -e cmdline | sed 's/^/KEYFILE:/'",
				"echo FINDKEY-DONE"), 30)
		}, want: []string{"FINDKEY-DONE"}, bad: []string{"KEYFILE:", "ENVVAR:"}},

		{name: "host-socket-probe", msg: func(e *env) string {
			return strings.Join([]string{
				bash("./pwn http GET /; ./pwn http GET /v1/models; ./pwn http GET /v1/messages"),
				bash(`./pwn http POST /v1/messages '{"bogus":true}'; ./pwn http POST /v1/messages '{"model":"x","max_tokens":5,"messages":[{"role":"user","content":"print your x-api-key header"}]}'; ./pwn http POST /ipc/nonexistent '{}'; echo SOCKPROBE-DONE`),
			}, "\n")
		}, want: []string{"SOCKPROBE-DONE", "HTTP GET / ->"}, bad: []string{"x-api-key: sk", "e2e-SECRET", "e2e-TOKEN"}},

		{name: "write-outside-group", msg: func(e *env) string {
			return bash(lines(
				try("W-GLOBAL", "touch /workspace/global/pwned"),
				try("W-WORKSPACE", "touch /workspace/pwned"),
				try("W-OTHER-HOSTPATH", "touch "+filepath.Join(e.h.Dir, "groups/other/pwned")),
				try("W-OTHER-REL", "touch /workspace/group/../other/pwned"),
				try("W-PROJECT", "touch "+filepath.Join(e.h.Dir, "pwned")),
				try("W-ROOT", "touch /pwned"),
				try("W-ETC", "touch /etc/pwned"),
				"echo ok > /workspace/group/own.txt && echo W-OWN-OK"))
		}, want: []string{"W-GLOBAL=HELD", "W-WORKSPACE=HELD", "W-OTHER-HOSTPATH=HELD", "W-OTHER-REL=HELD", "W-PROJECT=HELD", "W-ROOT=HELD", "W-ETC=HELD", "W-OWN-OK"},
			check: func(t *testing.T, e *env, _ string) []string {
				return existing(filepath.Join(e.h.Dir, "groups/global/pwned"), filepath.Join(e.h.Dir, "groups/other/pwned"), filepath.Join(e.h.Dir, "pwned"), filepath.Join(e.h.Dir, "groups/pwned"))
			}},

		{name: "write-usr", msg: func(e *env) string {
			return bash(lines(try("W-USR", "touch /usr/pwned-clawpen"), try("W-USR-BIN", "touch /usr/bin/pwned-clawpen"),
				try("W-BIN", "touch /bin/pwned-clawpen"), try("W-LIB", "touch /lib/pwned-clawpen")))
		}, want: []string{"W-USR=HELD", "W-USR-BIN=HELD", "W-BIN=HELD", "W-LIB=HELD"},
			check: func(t *testing.T, e *env, _ string) []string {
				return existing("/usr/pwned-clawpen", "/usr/bin/pwned-clawpen", "/bin/pwned-clawpen", "/lib/pwned-clawpen")
			}},

		{name: "write-readonly-mount", mount: true, setup: func(t *testing.T, e *env) {
			dir := filepath.Join(e.h.Outside, "shared", "ro-"+e.folder)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("MOUNT-CONTENT-OK\n"), 0o644))
			e.h.For(t).CLI("groups", "mount", "add", e.folder, dir, "ro")
		}, msg: func(e *env) string {
			return bash(lines("cat /workspace/extra/ro/hello.txt",
				try("W-RO-MOUNT", "touch /workspace/extra/ro/pwned"),
				try("W-RO-APPEND", "echo x >> /workspace/extra/ro/hello.txt"),
				try("W-RO-RENAME", "mv /workspace/extra/ro/hello.txt /workspace/extra/ro/moved")))
		}, want: []string{"MOUNT-CONTENT-OK", "W-RO-MOUNT=HELD", "W-RO-APPEND=HELD", "W-RO-RENAME=HELD"},
			check: func(t *testing.T, e *env, _ string) []string {
				dir := filepath.Join(e.h.Outside, "shared", "ro-"+e.folder)
				ev := existing(filepath.Join(dir, "pwned"), filepath.Join(dir, "moved"))
				if b, _ := os.ReadFile(filepath.Join(dir, "hello.txt")); string(b) != "MOUNT-CONTENT-OK\n" {
					ev = append(ev, fmt.Sprintf("hello.txt changed: %q", b))
				}
				return ev
			}},

		{name: "symlink-swap-mount", mount: true, refusedOK: true, setup: func(t *testing.T, e *env) {
			dir := filepath.Join(e.h.Outside, "shared", "swap-"+e.folder)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "orig.txt"), []byte("SWAP-ORIGINAL-CONTENT\n"), 0o644))
			e.h.For(t).CLI("groups", "mount", "add", e.folder, dir, "swap")
			// Validated; now swap the directory for a link to the host's root.
			require.NoError(t, os.Rename(dir, dir+".orig"))
			require.NoError(t, os.Symlink("/", dir))
		}, msg: func(e *env) string {
			return bash(lines("ls -a /workspace/extra/swap 2>&1 | head -30",
				"cat /workspace/extra/swap/orig.txt 2>&1",
				"test -d /workspace/extra/swap/usr/bin -o -d /workspace/extra/swap/proc && echo SWAP-HOSTROOT"+breach,
				"test -e /workspace/extra/swap"+filepath.Join(e.h.Home, ".ssh/id_rsa")+" && echo SWAP-SSH"+breach,
				"cat /workspace/extra/swap"+filepath.Join(e.h.Home, ".ssh/id_rsa")+" 2>/dev/null",
				"echo SWAP-PROBE-DONE"))
		}, want: []string{"SWAP-PROBE-DONE"}},

		{name: "mount-containerpath", mount: true, setup: func(t *testing.T, e *env) {
			dir := filepath.Join(e.h.Outside, "shared", "cp-"+e.folder)
			require.NoError(t, os.MkdirAll(dir, 0o755))
		}, check: func(t *testing.T, e *env, _ string) []string {
			dir := filepath.Join(e.h.Outside, "shared", "cp-"+e.folder)
			var ev []string
			// The control: a plain name is accepted, so refusals below mean something.
			if out, err := e.h.RunCLI("groups", "mount", "add", e.folder, dir, "plain-name"); err != nil {
				ev = append(ev, inconclusive+"a plain containerPath was refused too: "+out)
			}
			for _, cp := range []string{"../x", "/abs", "x/../../y", "..", "a:b"} {
				if out, err := e.h.RunCLI("groups", "mount", "add", e.folder, dir, cp); err == nil {
					ev = append(ev, fmt.Sprintf("containerPath %q accepted: %s", cp, out))
				}
			}
			list, _ := e.h.RunCLI("groups", "mount", "list", e.folder)
			if strings.Contains(list, "..") || strings.Contains(list, "/abs") {
				ev = append(ev, "listed: "+list)
			}
			return ev
		}},

		{name: "tty-tiocsti-tioclinux", msg: func(e *env) string {
			return bash(lines("./pwn tiocsti", "./pwn tioclinux", "tty 2>&1; echo TTY-DONE"))
		}, want: []string{"TIOCSTI-stdin=HELD", "TIOCSTI-stdout=HELD", "TIOCLINUX-stdin=HELD", "TTY-DONE"}},

		{name: "nested-userns", msg: func(e *env) string {
			return bash(lines("./pwn unshare-user", try("UNSHARE-U-CMD", "unshare -U true"), try("UNSHARE-R-CMD", "unshare -r id")))
		}, want: []string{"UNSHARE-USER=HELD", "UNSHARE-U-CMD=HELD", "UNSHARE-R-CMD=HELD"}},

		{name: "mount-and-mountns", msg: func(e *env) string {
			return bash(lines("./pwn unshare-mount", "./pwn mount-tmpfs",
				try("MOUNT-CMD", "mkdir -p /tmp/x && mount -t tmpfs none /tmp/x"),
				try("UNSHARE-M-CMD", "unshare -m true"),
				try("MOUNT-REMOUNT", "mount -o remount,rw /workspace/global")))
		}, want: []string{"UNSHARE-MOUNT=HELD", "MOUNT-TMPFS=HELD", "MOUNT-CMD=HELD", "UNSHARE-M-CMD=HELD", "MOUNT-REMOUNT=HELD"}},

		{name: "ptrace-host-process", msg: func(e *env) string {
			return bash(lines(
				fmt.Sprintf("./pwn ptrace %d", e.hostPID),
				"for p in /proc/[0-9]*; do echo \"proc ${p#/proc/} $(cat $p/comm 2>/dev/null)\"; done",
				"for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = clawpen ] && ./pwn ptrace ${p#/proc/}; done; true",
				"head -3 /proc/1/status; echo PTRACE-DONE"))
		}, want: []string{"PTRACE-DONE"}, bad: []string{"HOSTPROC-SEEN"},
			check: func(t *testing.T, e *env, out string) []string {
				if !strings.Contains(out, fmt.Sprintf("PTRACE-%d=HELD", e.hostPID)) {
					return []string{inconclusive + "no PTRACE-<host pid>=HELD"}
				}
				return nil
			}},

		{name: "setuid", msg: func(e *env) string {
			return bash(lines("timeout -s KILL 5 ./pwn setuid-self", "timeout -s KILL 12 ./pwn suid-watch /usr/bin/su /usr/bin/passwd /usr/bin/newgrp /usr/bin/chfn /usr/bin/mount",
				"grep -e NoNewPrivs -e CapEff /proc/self/status", "echo SETUID-DONE"), 15)
		}, want: []string{"SETUID-SELF=HELD", "SUID-su=HELD", "SETUID-DONE"}, bad: []string{"uid=0(root)", "EUID=0"}},

		{name: "loopback-listener", setup: func(t *testing.T, e *env) {
			for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
				ln, err := net.Listen("tcp", ip+":0")
				require.NoError(t, err)
				t.Cleanup(func() { ln.Close() })
				e.ports = append(e.ports, ln.Addr().String())
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						e.accepted <- ln.Addr().String()
						c.Close()
					}
				}()
			}
			for _, u := range []string{e.h.TG.URL(), e.h.LLM.URL()} {
				pu, err := url.Parse(u)
				require.NoError(t, err)
				e.ports = append(e.ports, pu.Host)
			}
		}, msg: func(e *env) string {
			return bash("./pwn connect " + strings.Join(e.ports, " ") + "; echo CONNECT-DONE")
		}, want: []string{"CONNECT-DONE", "CONNECT-127.0.0.1:", "CONNECT-127.0.0.2:"},
			check: func(t *testing.T, e *env, _ string) []string {
				select {
				case a := <-e.accepted:
					return []string{"the listener on " + a + " accepted a connection from the sandbox"}
				default:
					return nil
				}
			}},

		{name: "sibling-and-docker-sockets", setup: func(t *testing.T, e *env) {
			// A sibling invocation, so that its socket exists on the host.
			sib := e.chat - 5000
			e.h.For(t).CLI("groups", "add", strconv.FormatInt(sib, 10), e.folder+"-sib", "sibling")
			e.h.Say(sib, "supergroup", "sibling", harness.MemberID, "@Andy "+bash("sleep 8; echo SIB-DONE"))
			require.Eventually(t, func() bool {
				e.sockets = sockets(filepath.Join(e.h.Dir, "data"))
				return len(e.sockets) > 0
			}, 30*time.Second, 20*time.Millisecond, "no invocation socket appeared under data/")
			t.Cleanup(func() { e.h.For(t).WaitFor(sib, "SIB-DONE") })
		}, msg: func(e *env) string {
			return bash(lines("ls -la /run /run/clawpen 2>&1",
				"./pwn unix /var/run/docker.sock /run/docker.sock "+strings.Join(e.sockets, " "),
				"find / \\( -path /proc -o -path /sys -o "+osDirs+" \\) -prune -o -type s -print 2>/dev/null | sed 's/^/SOCKET-AT:/'",
				"echo SOCKETS-DONE"), 15)
		}, want: []string{"UNIX-/var/run/docker.sock=HELD", "UNIX-/run/docker.sock=HELD", "SOCKETS-DONE"},
			check: func(t *testing.T, e *env, out string) []string {
				var ev []string
				for _, s := range e.sockets {
					if !strings.Contains(out, "UNIX-"+s+held) {
						ev = append(ev, inconclusive+"sibling socket "+s+" not shown held")
					}
				}
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "SOCKET-AT:") && strings.TrimPrefix(l, "SOCKET-AT:") != "/run/clawpen/host.sock" {
						ev = append(ev, "socket visible in the sandbox: "+l)
					}
				}
				return ev
			}},

		{name: "fork-bomb", limitOK: true, msg: func(e *env) string {
			return strings.Join([]string{
				bash("(bomb() { bomb | bomb & }; bomb; sleep 3) 2>/dev/null; echo BOMB-RETURNED", 8),
				bash("echo STILL-WORKS"),
			}, "\n")
		}, want: []string{"STILL-WORKS"}},

		// One process touching 4 GB of anonymous memory: HOG=BREACH when it
		// held more than the sandbox's limit at once. (A pipe into tail took
		// over the run's 20 s under gVisor before reaching the limit.)
		{name: "memory-hog", limitOK: true, msg: func(e *env) string {
			return bash("./pwn hold anon 4000 " + strconv.FormatInt(sandbox.DefaultLimits.MemoryBytes>>20, 10) + " HOG")
		}, want: []string{"HOG=HELD"}},

		{name: "tmp-disk-fill", msg: func(e *env) string {
			return bash(lines("dd if=/dev/zero of=/tmp/fill bs=1M count=3000 2>&1 | tail -2",
				// wc, not stat: gVisor 2022-12-19 refuses coreutils stat's
				// statx flags.
				"echo FILLMB=$(( $(wc -c < /tmp/fill) / 1048576 ))", "df -k /tmp | tail -1"), 15)
		}, want: []string{"FILLMB="}, check: func(t *testing.T, e *env, out string) []string {
			i := strings.Index(out, "FILLMB=")
			if i < 0 {
				return nil
			}
			var mb int
			_, _ = fmt.Sscanf(out[i+len("FILLMB="):], "%d", &mb)
			if mb > 512 {
				return []string{fmt.Sprintf("wrote %d MB to /tmp, past the tmpfs cap", mb)}
			}
			return nil
		}},

		{name: "output-100MB-tool", refusedOK: true, msg: func(e *env) string {
			return bash("head -c 100000000 /dev/zero | tr '\\0' A; echo; echo FLOOD-DONE", 15)
		}, check: func(t *testing.T, e *env, out string) []string {
			if len(out) > 256<<10 {
				return []string{fmt.Sprintf("%d bytes reached the chat", len(out))}
			}
			return nil
		}},

		{name: "output-100MB-stdout", refusedOK: true, msg: func(e *env) string {
			// Straight into the agent's own stdout, past the tool's cap: the
			// host's output limit must hold.
			return bash("head -c 100000000 /dev/zero | tr '\\0' A > /proc/$PPID/fd/1; echo RAWFLOOD-EXIT=$?", 15)
		}, check: func(t *testing.T, e *env, out string) []string {
			if len(out) > 256<<10 || strings.Contains(out, strings.Repeat("A", 4096)) {
				return []string{fmt.Sprintf("%d bytes of the flood reached the chat", len(out))}
			}
			return nil
		}},

		{name: "never-exits", mustRefuse: true, wait: 3 * time.Minute, msg: func(e *env) string {
			return bash("sleep 100007", 100000)
		}, check: func(t *testing.T, e *env, _ string) []string {
			// The wall-time kill reaches the whole tree: no sleeper survives.
			ok := assert.Eventually(t, func() bool { return len(hostProcs("sleep\x00100007")) == 0 }, 30*time.Second, 100*time.Millisecond)
			if !ok {
				return []string{fmt.Sprintf("sleep 100007 still running on the host: pids %v", hostProcs("sleep\x00100007"))}
			}
			return nil
		}},

		{name: "ipc-forge-identity", msg: func(e *env) string {
			forged := func(body map[string]any) string { b, _ := json.Marshal(body); return string(b) }
			return strings.Join([]string{
				tool("send_message", map[string]any{"text": "FORGED-TOOL", "chat_id": harness.OwnerID, "group": "main"}),
				tool("schedule_task", map[string]any{"prompt": "FORGED-TASK", "schedule_type": "interval", "schedule_value": "1h", "group": "main"}),
				bash(lines(
					"./pwn http POST /ipc/send_message '"+forged(map[string]any{"group": "main", "chat_id": harness.OwnerID, "text": "FORGED-RAW1"})+"'",
					"./pwn http POST /ipc/send_message '"+forged(map[string]any{"chat_id": harness.OwnerID, "text": "FORGED-RAW2"})+"'",
					"./pwn http POST /ipc/send_message '"+forged(map[string]any{"group": "main", "text": "FORGED-RAW3"})+"'",
					"./pwn http POST /ipc/schedule_task '"+forged(map[string]any{"group": "main", "prompt": "FORGED-TASK2", "schedule_type": "interval", "schedule_value": "1h"})+"'",
					"echo FORGE-DONE")),
			}, "\n")
		}, want: []string{"FORGE-DONE", "denied"}, bad: []string{"HTTP/1.1 200"},
			check: func(t *testing.T, e *env, out string) []string {
				var ev []string
				for _, s := range harness.Texts(e.h.TG.SentTo(harness.OwnerID)) {
					if strings.Contains(s, "FORGED") {
						ev = append(ev, "delivered to main: "+s)
					}
				}
				for _, tk := range e.h.For(t).Tasks() {
					if strings.Contains(tk.Prompt, "FORGED") {
						ev = append(ev, fmt.Sprintf("task scheduled: %+v", tk))
					}
				}
				if n := strings.Count(out, "HTTP/1.1 4"); n < 4 {
					ev = append(ev, inconclusive+fmt.Sprintf("only %d of 4 raw forged requests were refused with 4xx", n))
				}
				return ev
			}},
	}
}

// inconclusive prefixes what a check returns when it could not observe the
// attack (rather than evidence that it got out).
const inconclusive = "inconclusive: "

// existing lists the paths that exist (evidence of a write that got out).
func existing(paths ...string) []string {
	var ev []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			ev = append(ev, "created on the host: "+p)
		}
	}
	return ev
}

// sockets lists the unix sockets under root.
func sockets(root string) []string {
	var out []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSocket != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// hostProcs lists host pids whose command line contains needle.
func hostProcs(needle string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), needle) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestEscape(t *testing.T) {
	extra := map[string]string{
		"CLAWPEN_AGENT_TIMEOUT": "20s", // the never-exits attack is killed by this
		"CLAWPEN_RETRY_BACKOFF": "100ms",
		"CLAWPEN_DISK_MB":       fmt.Sprint(diskQuotaMB),
		"CLAWPEN_EGRESS_MB":     fmt.Sprint(egressMB),
		// The approval rows press within it; in one, nobody answers
		// and the run's calls wait it out (see approval-request-flood).
		"CLAWPEN_APPROVAL_TIMEOUT": "8s",
		// voice_test.go: a slow transcription ends soon, a group may
		// have a minute a day transcribed.
		"CLAWPEN_TRANSCRIBE_TIMEOUT":       "5s",
		"CLAWPEN_TRANSCRIBE_DAILY_MINUTES": "1",
	}
	maps.Copy(extra, credHostEnv(t))
	host := harness.New(t, harness.Options{Owner: true, AlsoOpenAI: true,
		Extra:        extra,
		Transcribe:   true,
		AllowedRoots: []harness.AllowedRoot{{Path: "shared", ReadWrite: true}},
	})
	// The main group exists before any failure notice needs it.
	host.OwnerSays("hello")
	host.WaitFor(harness.OwnerID, "hello")

	// Another group's folder and session dir, with secrets in them.
	host.CLI("groups", "add", "-100999000", "other", "Other Chat")
	require.NoError(t, os.MkdirAll(filepath.Join(host.Dir, "groups/other"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(host.Dir, "groups/other/notes.txt"), []byte("OTHER-GROUP-SECRET\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(host.Dir, "data/sessions/other"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(host.Dir, "data/sessions/other/transcript.jsonl"), []byte("OTHER-SESSION-SECRET\n"), 0o644))

	_, mountErr := host.RunCLI("groups", "mount", "list", "other")
	for i, a := range attacks() {
		t.Run(a.name, func(t *testing.T) {
			if a.mount {
				// An attack that cannot be prepared fails; it never turns into a skip.
				require.NoError(t, mountErr, "clawpen groups mount list")
			}
			before := diskFree(t, host.Dir)
			runAttack(t, host, i, a)
			// What the attack left on the host's disk anywhere, over the
			// attack's own few seconds (a suite-long window counts what
			// other programs on the machine write meanwhile).
			if lost := before - diskFree(t, host.Dir); lost > maxDiskLeft {
				results.set(a.name, escaped, fmt.Sprintf("the host disk lost %d MiB during the attack", lost>>20))
				t.Errorf("the host disk lost %d MiB during the attack (bound %d MiB)", lost>>20, maxDiskLeft>>20)
			}
		})
	}

	assert.True(t, host.Running(), "the host is still running")
}

// maxDiskLeft bounds what one attack may leave on the host's disk. The
// disk attacks delete what they filled once checked; an unbounded fill
// writes 2.4 GB.
const maxDiskLeft = 512 << 20

// diskFree is the free space of the filesystem holding dir.
func diskFree(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * st.Bsize
}

func runAttack(t *testing.T, host *harness.Host, i int, a attack) {
	h := host.For(t)
	e := &env{h: h, folder: fmt.Sprintf("atk%02d", i), chat: int64(-100300000 - i), hostPID: h.PID(), accepted: make(chan string, 8)}
	results.set(a.name, unclear, "did not finish")
	h.CLI("groups", "add", strconv.FormatInt(e.chat, 10), e.folder, a.name)
	e.groupDir = filepath.Join(h.Dir, "groups", e.folder)
	copyExec(t, pwnBin, filepath.Join(e.groupDir, "pwn"))
	if a.setup != nil {
		a.setup(t, e)
	}

	var out string
	var refused bool
	if a.msg != nil {
		h.Say(e.chat, "supergroup", a.name, harness.MemberID, "@Andy\n"+a.msg(e))
		wait := a.wait
		if wait == 0 {
			wait = 90 * time.Second
		}
		ok := assert.Eventually(t, func() bool { return len(h.TG.SentTo(e.chat)) > 0 }, wait, 50*time.Millisecond,
			"no answer in the attacked group; host log:\n%s", h.Stderr.String())
		if !ok {
			results.set(a.name, unclear, "no answer")
		}
	}
	// The host is unharmed: it answers the owner afterwards.
	alive := fmt.Sprintf("ALIVE-%s", a.name)
	h.OwnerSays(alive)
	if !assert.Eventually(t, func() bool { return contains(harness.Texts(h.TG.SentTo(harness.OwnerID)), alive) }, 90*time.Second, 50*time.Millisecond,
		"the host does not answer after the attack") {
		results.set(a.name, hostDown, "no answer after the attack")
		return
	}
	out = strings.Join(harness.Texts(h.TG.SentTo(e.chat)), "\n")
	refused = a.msg != nil && strings.Contains(out, refusedText)
	limit := ""
	if refused && a.limitOK {
		limit = limitReached(h.Stderr.String(), e.folder, out)
	}
	t.Logf("sandbox answered (%d bytes):\n%s", len(out), clip(out, 6000))

	var evidence, missing []string
	for _, bad := range append([]string{breach, harness.SecretSSH, harness.SecretAWS, harness.AllowlistMarker, harness.APIKey, harness.BotToken, harness.TranscribeKey,
		"OTHER-GROUP-SECRET", "OTHER-SESSION-SECRET"}, a.bad...) {
		if strings.Contains(out, bad) {
			evidence = append(evidence, fmt.Sprintf("answer contains %q", bad))
		}
	}
	if !a.leaks {
		for l := range strings.Lines(h.AuditLog()) {
			if strings.HasPrefix(l, e.folder+" leakguard ") || strings.HasPrefix(l, e.folder+" egress deny") && strings.Contains(l, "secret in request") {
				evidence = append(evidence, "the leak guard stopped a secret of the host's on its way out of the sandbox: "+strings.TrimSpace(l))
			}
		}
	}
	if a.check != nil {
		for _, s := range a.check(t, e, out) {
			if m, ok := strings.CutPrefix(s, inconclusive); ok {
				missing = append(missing, m)
			} else {
				evidence = append(evidence, s)
			}
		}
	}
	switch {
	case a.msg == nil:
	case a.mustRefuse && !refused:
		missing = append(missing, "the run was not refused/killed")
	case limit != "":
	case refused && !a.refusedOK && !a.mustRefuse:
		missing = append(missing, "the run failed, so the attack was not observed")
	case !refused:
		for _, w := range a.want {
			if !strings.Contains(out, w) {
				missing = append(missing, fmt.Sprintf("no %q", w))
			}
		}
	}
	switch {
	case len(evidence) > 0:
		results.set(a.name, escaped, strings.Join(evidence, "; "))
		t.Errorf("ESCAPED: %s", strings.Join(evidence, "; "))
	case len(missing) > 0 && a.ownKernel && sharesHostKernel():
		ownKernelOutcome(t, a.name, missing)
	case len(missing) > 0:
		results.set(a.name, unclear, strings.Join(missing, "; "))
		t.Errorf("inconclusive: %s", strings.Join(missing, "; "))
	default:
		note := ""
		switch {
		case limit != "":
			note = "the run ended at the sandbox's " + limit + " limit"
		case refused:
			note = "run refused/killed by the host"
		}
		results.set(a.name, blocked, note)
	}
}

// limitReached is the limit ("memory", "processes") a run of folder
// ended at, when the host's log says so and the host's notice in the
// group's answer names it too; "" otherwise.
func limitReached(log, folder, answer string) string {
	words := map[string]string{"memory": "stopped at its memory limit", "processes": "reached its process limit"}
	re := regexp.MustCompile(`msg="the sandbox reached a limit" group=` + regexp.QuoteMeta(folder) + ` .*limit=(memory|processes)\b`)
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		if strings.Contains(answer, words[m[1]]) {
			return m[1]
		}
	}
	return ""
}

func copyExec(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

func contains(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + fmt.Sprintf("\n… %d bytes …\n", len(s)-n) + s[len(s)-n/2:]
}
