package gvisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// These tests run the real runsc. They need root and the clawpen-sandbox
// user (the disk owner of what the sandbox writes); without either they
// are skipped with the reason.

type env struct {
	g        *Backend
	stateDir string
	uid, gid int
}

func setup(t *testing.T) env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("gvisor tests need root (runsc does)")
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		t.Skip("runsc not installed")
	}
	u, err := user.Lookup("clawpen-sandbox")
	if err != nil {
		t.Skip("no clawpen-sandbox user: " + err.Error())
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	e := env{stateDir: filepath.Join(dir, "gvisor"), uid: uid, gid: gid}
	e.g = newBackend(t, e, dir)
	return e
}

func newBackend(t *testing.T, e env, dir string) *Backend {
	t.Helper()
	g, err := New(context.Background(), Config{StateDir: e.stateDir, PinDir: filepath.Join(dir, "pins"),
		DiskUID: e.uid, DiskGID: e.gid, Command: []string{"/bin/true"}, Prefix: "clawpen-gvtest-" + randID()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func randID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// groupDir is a group folder as the host makes it: the sandbox user's.
func (e env) groupDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "group")
	require.NoError(t, os.Mkdir(d, 0o755))
	require.NoError(t, os.Chown(d, e.uid, e.gid))
	require.NoError(t, os.Chmod(filepath.Dir(d), 0o755))
	return d
}

func (e env) run(t *testing.T, spec sandbox.Spec, script string) (sandbox.Result, string) {
	t.Helper()
	var out bytes.Buffer
	if spec.GroupDir == "" {
		spec.GroupDir = e.groupDir(t)
	}
	spec.InvocationID = randID()
	spec.Group = "g"
	spec.Stdout = &out
	spec.Command = []string{"/bin/sh", "-c", script}
	if spec.Limits.Timeout == 0 {
		spec.Limits.Timeout = 60 * time.Second
	}
	res, err := e.g.Run(context.Background(), spec)
	require.NoError(t, err, "stderr: %s", res.Stderr)
	return res, out.String()
}

func TestAgentEcho(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{Stdin: []byte("job\n")}, "read j; echo got $j; id -u; id -g; pwd")
	assert.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, "got job\n1000\n1000\n/workspace/group\n", out)
}

func TestCannotWriteOutside(t *testing.T) {
	e := setup(t)
	group := e.groupDir(t)
	res, out := e.run(t, sandbox.Spec{GroupDir: group}, `
for p in /usr/x /x /etc/x /bin/x /workspace/x /proc/x; do
  if echo hi > $p 2>/dev/null; then echo "wrote $p"; fi
done
echo mine > /workspace/group/f && echo ok`)
	assert.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, "ok\n", out)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(group, "f"), &st))
	assert.Equal(t, uint32(e.uid), st.Uid, "uid 1000 writes as the sandbox user")
	assert.Equal(t, uint32(e.gid), st.Gid)
}

func TestNoPrivileges(t *testing.T) {
	e := setup(t)
	_, out := e.run(t, sandbox.Spec{}, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status`)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 2, out)
		if f[0] == "NoNewPrivs:" {
			assert.Equal(t, "1", f[1])
			continue
		}
		assert.Equal(t, "0000000000000000", f[1], l)
	}
}

func TestNoNetwork(t *testing.T) {
	e := setup(t)
	_, out := e.run(t, sandbox.Spec{}, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	assert.Equal(t, "lo\n", out, "only a loopback")
}

// TestOwnKernel: the sandbox's kernel is gVisor's, not the host's.
func TestOwnKernel(t *testing.T) {
	e := setup(t)
	var u unix.Utsname
	require.NoError(t, unix.Uname(&u))
	host := unix.ByteSliceToString(u.Release[:])
	_, out := e.run(t, sandbox.Spec{}, `uname -r; cat /proc/version`)
	require.NotEmpty(t, strings.TrimSpace(out))
	assert.NotContains(t, out, host)
}

func TestSymlinkStaysInside(t *testing.T) {
	e := setup(t)
	group := e.groupDir(t)
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(group, "link")))
	_, out := e.run(t, sandbox.Spec{GroupDir: group}, `cat /workspace/group/link 2>/dev/null || echo unreadable`)
	assert.Equal(t, "unreadable\n", out, "the link resolves inside the sandbox, whose /etc has no hostname")
}

// TestSwappedSourceRefused: a group folder swapped for a symlink after it
// was validated is not bound (its pin refuses a symlink); nothing runs.
func TestSwappedSourceRefused(t *testing.T) {
	e := setup(t)
	group := e.groupDir(t)
	require.NoError(t, os.Remove(group))
	require.NoError(t, os.Symlink("/", group))
	var out bytes.Buffer
	_, err := e.g.Run(context.Background(), sandbox.Spec{InvocationID: randID(), Group: "g", GroupDir: group, Stdout: &out,
		Command: []string{"/bin/sh", "-c", "echo ran"}})
	require.Error(t, err)
	assert.Empty(t, out.String())
}

func TestStateDirPrivate(t *testing.T) {
	e := setup(t)
	for _, d := range []string{e.stateDir, e.g.state, e.g.bundles} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
}

// TestNothingOutlives: a process left in the background is gone when Run
// returns, and so is every host process of the sandbox.
func TestNothingOutlives(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{}, `sleep 600 >/dev/null 2>&1 & echo started`)
	assert.Equal(t, "started\n", out, res.Stderr)
	assert.Empty(t, hostProcesses(e.g.cfg.Prefix), "no process of the sandbox is left")
	left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", e.g.cfg.Prefix, "*", "tasks"))
	assert.Empty(t, left, "nor its cgroup")
}

// hostProcesses are the host processes in one of the prefix's cgroups or
// naming it on their command line.
func hostProcesses(prefix string) []string {
	var found []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cg, _ := os.ReadFile("/proc/" + p.Name() + "/cgroup")
		cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if bytes.Contains(cg, []byte(prefix)) || bytes.Contains(cmd, []byte(prefix)) {
			found = append(found, p.Name()+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return found
}

func TestTimeLimit(t *testing.T) {
	e := setup(t)
	res, _ := e.run(t, sandbox.Spec{Limits: sandbox.Limits{Timeout: 2 * time.Second}}, `sleep 600`)
	assert.True(t, res.TimedOut)
	assert.Empty(t, hostProcesses(e.g.cfg.Prefix))
}

func TestOutputLimit(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{Limits: sandbox.Limits{OutputBytes: 1000}}, `while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done`)
	assert.True(t, res.OutputTruncated)
	assert.Len(t, out, 1000)
	assert.Empty(t, hostProcesses(e.g.cfg.Prefix))
}

// TestMemoryLimit: a program cannot get more memory than the limit. With
// runsc 2022-12-19 on cgroup v1 the allocation does not fail: the kernel's
// OOM killer ends the whole sandbox (exit 137). The host made the memory
// cgroup (cgroup.go) and read its OOM kill: Result.Limit says it.
func TestMemoryLimit(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 128 << 20, TmpBytes: 16 << 20, ShmBytes: 16 << 20, Timeout: 90 * time.Second}},
		`python3 -c 'x = bytearray(400 << 20); x[-1] = 1; print("allocated")'`)
	assert.NotContains(t, out, "allocated")
	assert.NotEqual(t, 0, res.ExitCode)
	t.Logf("memory limit: exit %d, timed out %v, limit %q, stderr %q", res.ExitCode, res.TimedOut, res.Limit, lastLines(res.Stderr))
	assert.Equal(t, sandbox.MemoryLimit, res.Limit, "the host read the OOM kill from the sandbox's cgroup")
	assertNoCgroup(t, e)
}

// assertNoCgroup: the host removed every cgroup of its sandboxes.
func assertNoCgroup(t *testing.T, e env) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", e.g.cfg.Prefix, "*"))
	var dirs []string
	for _, l := range left {
		if fi, err := os.Stat(l); err == nil && fi.IsDir() {
			dirs = append(dirs, l)
		}
	}
	assert.Empty(t, dirs, "cgroups left after the run")
}

// TestPidsLimit: the host's pids under one sandbox stay bounded. Under
// the ptrace platform the cgroup counts the Sentry's threads and one stub
// per agent task, so a fork bomb does not see fork fail: the sandbox ends
// (runsc 2022-12-19; below ~100 pids the Sentry cannot even start). The
// host read the refused forks from the pids cgroup it made.
func TestPidsLimit(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{Limits: sandbox.Limits{Pids: 128, Timeout: 30 * time.Second}},
		`echo started; for i in $(seq 300); do sleep 30 & done; echo all forked`)
	t.Logf("pids limit: exit %d, out %q, limit %q, stderr %q", res.ExitCode, out, res.Limit, lastLines(res.Stderr))
	assert.Equal(t, "started\n", out, "300 processes never all ran")
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Equal(t, sandbox.ProcessLimit, res.Limit, "the host read the refused forks from the sandbox's cgroup")
	assert.Empty(t, hostProcesses(e.g.cfg.Prefix))
	assertNoCgroup(t, e)
}

// TestOrphansRemoved: a host that starts again removes the sandboxes a
// previous one left running in its state dir.
func TestOrphansRemoved(t *testing.T) {
	e := setup(t)
	block := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.g.Run(context.Background(), sandbox.Spec{InvocationID: randID(), Group: "g", GroupDir: e.groupDir(t),
			Job: func(ctx context.Context) ([]byte, error) {
				select {
				case <-block:
				case <-ctx.Done():
				}
				return nil, context.Cause(ctx)
			},
			Command: []string{"/bin/sh", "-c", "cat >/dev/null; sleep 600"}, Limits: sandbox.Limits{Timeout: time.Minute}})
		done <- err
	}()
	defer close(block)
	require.Eventually(t, func() bool {
		out, _ := exec.Command("runsc", "--root", e.g.state, "list", "--quiet").Output()
		return len(strings.TrimSpace(string(out))) > 0
	}, 30*time.Second, 100*time.Millisecond)
	n, err := e.g.RemoveOrphans(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end with its sandbox")
	}
	out, _ := exec.Command("runsc", "--root", e.g.state, "list", "--quiet").Output()
	assert.Empty(t, strings.TrimSpace(string(out)))
}

// TestSeccompInside: the filter is loaded inside gVisor's kernel: keyctl
// is refused; threads still start (clone3 is not refused with EPERM, on
// which libc would not fall back to clone).
func TestSeccompInside(t *testing.T) {
	e := setup(t)
	_, out := e.run(t, sandbox.Spec{}, `grep '^Seccomp:' /proc/self/status; unshare -U true 2>/dev/null && echo userns made; unshare -m true 2>/dev/null && echo mountns made; python3 -c '
import ctypes, errno, socket, threading
for fam in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
    socket.socket(fam, socket.SOCK_STREAM).close()
print("sockets made")
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(250, 0, 0, 0, 0, 0)
print("keyctl", r, errno.errorcode.get(ctypes.get_errno()))
t = threading.Thread(target=lambda: print("thread ran")); t.start(); t.join()'`)
	assert.Equal(t, "Seccomp:\t2\nsockets made\nkeyctl -1 EPERM\nthread ran\n", out)
}

// TestTerminal: a command run with a terminal (`clawpen run`) gets one, of
// the owner's size, on which TIOCSTI (typing into the owner's shell) fails.
func TestTerminal(t *testing.T) {
	e := setup(t)
	var out bytes.Buffer
	// Typed, so echoed: the markers are split in what is typed.
	in := `test -t 0 && echo IS-A""-TTY; stty size; python3 -c 'import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b"x")' 2>/dev/null && echo STI-WO""RKED || echo STI-RE""FUSED; exit` + "\n"
	res, err := e.g.Run(context.Background(), sandbox.Spec{InvocationID: randID(), Group: "g", GroupDir: e.groupDir(t), Command: []string{"/bin/sh"},
		Limits: sandbox.Limits{Timeout: 60 * time.Second},
		Stdio:  &sandbox.Stdio{TTY: true, Rows: 30, Cols: 100, In: strings.NewReader(in), Out: &out, Err: &out}})
	require.NoError(t, err, "stderr: %s", res.Stderr)
	t.Logf("terminal:\n%s", out.String())
	assert.Contains(t, out.String(), "IS-A-TTY")
	assert.Contains(t, out.String(), "30 100")
	assert.Contains(t, out.String(), "STI-REFUSED")
	assert.NotContains(t, out.String(), "STI-WORKED")
}
