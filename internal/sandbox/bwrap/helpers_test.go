package bwrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// sandboxUID is the unprivileged host user the tests run bwrap as when root.
const sandboxUID, sandboxGID = 1000, 1000

// fixture is a throw-away project layout under /tmp, reachable by the sandbox
// user: groups/<g>, groups/other, groups/global, data/sessions/<g>, a fake host
// home with a planted key, and a unix socket.
type fixture struct {
	base, group, other, global, session, home, sock string
	b                                               *Backend
	uid                                             int
}

func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
}

func runAs() (int, int) {
	if os.Getuid() == 0 {
		return sandboxUID, sandboxGID
	}
	return -1, -1
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	requireBwrap(t)
	base, err := os.MkdirTemp("/tmp", "clawpen-bwrap-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = os.Chmod(base, 0o755)
		_ = os.RemoveAll(base)
	})
	require.NoError(t, os.Chmod(base, 0o755))
	f := &fixture{
		base:    base,
		group:   filepath.Join(base, "groups", "team"),
		other:   filepath.Join(base, "groups", "other"),
		global:  filepath.Join(base, "groups", "global"),
		session: filepath.Join(base, "data", "sessions", "team"),
		home:    filepath.Join(base, "home", "owner"),
		sock:    filepath.Join(base, "data", "sockets", "inv.sock"),
	}
	for _, d := range []string{f.group, f.other, f.global, f.session, filepath.Join(f.home, ".ssh"), filepath.Dir(f.sock)} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(f.group, "ORIGINAL"), []byte("mine"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.other, "OTHER_GROUP_SECRET"), []byte("theirs"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.global, "MEMORY.md"), []byte("global"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.home, ".ssh", "id_rsa"), []byte("FAKE PRIVATE KEY"), 0o644))

	uid, gid := runAs()
	cfg := Config{RunAsUID: uid, RunAsGID: gid, Command: []string{"/bin/true"}}
	if mod != nil {
		mod(&cfg)
	}
	uid, gid = cfg.RunAsUID, cfg.RunAsGID
	f.uid = os.Getuid()
	if uid > 0 {
		f.uid = uid
		// Everything the sandbox user may write (and global, so that read-only
		// is shown to come from the mount, not from permissions).
		for _, d := range []string{f.group, f.global, f.session, f.other} {
			require.NoError(t, filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Chown(p, uid, gid)
			}))
		}
	}

	b, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	f.b = b
	return f
}

func (f *fixture) spec() sandbox.Spec {
	return sandbox.Spec{
		InvocationID: "test",
		Group:        "team",
		GroupDir:     f.group,
		GlobalDir:    f.global,
		SessionDir:   f.session,
		Env:          map[string]string{"TZ": "UTC", "CLAWPEN_ASSISTANT_NAME": "Andy"},
		Limits: sandbox.Limits{
			Timeout:     30 * time.Second,
			OutputBytes: 1 << 20,
			MemoryBytes: 512 << 20,
			Pids:        64,
			TmpBytes:    1 << 20,
		},
	}
}

type outcome struct {
	res    sandbox.Result
	stdout string
	err    error
}

// sh runs script with /bin/sh -c inside the sandbox.
func (f *fixture) sh(t testing.TB, spec sandbox.Spec, script string) outcome {
	t.Helper()
	return f.cmd(t, spec, "/bin/sh", "-c", script)
}

func (f *fixture) cmd(t testing.TB, spec sandbox.Spec, command ...string) outcome {
	t.Helper()
	var out bytes.Buffer
	if spec.Stdout == nil {
		spec.Stdout = &out
	}
	res, err := f.b.run(context.Background(), spec, command)
	return outcome{res: res, stdout: out.String(), err: err}
}

// marker is a unique token to find a test's processes by their command line.
func marker(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	// A number, so that it can be a sleep duration: 900.<random digits>.
	return "900." + strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 10)
}

// processesWith lists host pids whose command line contains s.
func processesWith(t testing.TB, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), s) {
			pids = append(pids, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return pids
}
