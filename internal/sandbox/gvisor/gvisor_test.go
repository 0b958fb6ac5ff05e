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
// are skipped with the reason. What every backend does is the conformance
// suite's (conformance_test.go); these are gVisor's own.

type diskUser struct{ uid, gid int }

// sandboxUser is the host user the sandbox's writes land as; it skips t
// when this machine cannot run runsc.
func sandboxUser(t *testing.T) diskUser {
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
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	return diskUser{uid, gid}
}

// testBackend is a backend with its state under dir, running /bin/true
// unless told otherwise, in cgroups of its own prefix.
func testBackend(t *testing.T, u diskUser, dir string) *Backend {
	t.Helper()
	require.NoError(t, os.Chmod(dir, 0o755))
	g, err := New(context.Background(), Config{StateDir: filepath.Join(dir, "gvisor"), PinDir: filepath.Join(dir, "pins"),
		DiskUID: u.uid, DiskGID: u.gid, Command: []string{"/bin/true"}, Prefix: "clawpen-gvtest-" + randID()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// assertGone: no host process of the run is left (runsc, its gofer, the
// Sentry and its stubs name the container or sit in its cgroup), nor any
// of its cgroups.
func assertGone(t *testing.T, invocation string) {
	t.Helper()
	assert.Empty(t, hostProcesses(invocation), "no process of the sandbox is left")
	left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", "clawpen-gvtest-*", "*"+invocation))
	assert.Empty(t, left, "nor a cgroup")
}

type env struct {
	g *Backend
	u diskUser
}

func setup(t *testing.T) env {
	t.Helper()
	u := sandboxUser(t)
	return env{g: testBackend(t, u, t.TempDir()), u: u}
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
	require.NoError(t, os.Chown(d, e.u.uid, e.u.gid))
	require.NoError(t, os.Chmod(filepath.Dir(d), 0o755))
	return d
}

// run runs script and checks that nothing of the sandbox is left.
func (e env) run(t *testing.T, spec sandbox.Spec, script string) (sandbox.Result, string) {
	t.Helper()
	var out bytes.Buffer
	spec.GroupDir = e.groupDir(t)
	spec.InvocationID = randID()
	spec.Group = "g"
	spec.Stdout = &out
	spec.Command = []string{"/bin/sh", "-c", script}
	if spec.Limits.Timeout == 0 {
		spec.Limits.Timeout = 60 * time.Second
	}
	res, err := e.g.Run(context.Background(), spec)
	require.NoError(t, err, "stderr: %s", res.Stderr)
	assertGone(t, spec.InvocationID)
	return res, out.String()
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

func TestStateDirPrivate(t *testing.T) {
	e := setup(t)
	for _, d := range []string{e.g.cfg.StateDir, e.g.state, e.g.bundles} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
}

// hostProcesses are the host processes in a cgroup or with a command line
// that names s.
func hostProcesses(s string) []string {
	var found []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cg, _ := os.ReadFile("/proc/" + p.Name() + "/cgroup")
		cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if bytes.Contains(cg, []byte(s)) || bytes.Contains(cmd, []byte(s)) {
			found = append(found, p.Name()+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return found
}

// TestPidsLimit: the host's pids under one sandbox stay bounded. Under
// the ptrace platform the cgroup counts the Sentry's threads and one stub
// per agent task (hostPids leaves room for them), so a fork bomb does not
// see fork fail: the sandbox ends (runsc 2022-12-19). The host read the
// refused forks from the pids cgroup it made, and removed it (run).
func TestPidsLimit(t *testing.T) {
	e := setup(t)
	res, out := e.run(t, sandbox.Spec{Limits: sandbox.Limits{Pids: 128, Timeout: 30 * time.Second}},
		`echo started; for i in $(seq 300); do sleep 30 & done; echo all forked`)
	t.Logf("pids limit: exit %d, out %q, limit %q, stderr %q", res.ExitCode, out, res.Limit, lastLines(res.Stderr))
	assert.Equal(t, "started\n", out, "300 processes never all ran")
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Equal(t, sandbox.ProcessLimit, res.Limit, "the host read the refused forks from the sandbox's cgroup")
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

// TestSeccompInside: the filter is loaded inside gVisor's kernel (its
// Seccomp line and user namespaces are the suite's View rows): keyctl
// and mount namespaces are refused; sockets are made and threads still
// start (clone3 is not refused with EPERM, on which libc would not fall
// back to clone).
func TestSeccompInside(t *testing.T) {
	e := setup(t)
	_, out := e.run(t, sandbox.Spec{}, `unshare -m true 2>/dev/null && echo mountns made; python3 -c '
import ctypes, errno, socket, threading
for fam in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
    socket.socket(fam, socket.SOCK_STREAM).close()
print("sockets made")
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(250, 0, 0, 0, 0, 0)
print("keyctl", r, errno.errorcode.get(ctypes.get_errno()))
t = threading.Thread(target=lambda: print("thread ran")); t.start(); t.join()'`)
	assert.Equal(t, "sockets made\nkeyctl -1 EPERM\nthread ran\n", out)
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
