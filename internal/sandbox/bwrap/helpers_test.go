package bwrap

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// sandboxUID is the unprivileged host user the tests run bwrap as when root.
const sandboxUID, sandboxGID = 1000, 1000

// fixture is a backend over a throw-away layout (sandboxtest.Layout); uid
// is the host user the sandbox's writes belong to.
type fixture struct {
	*sandboxtest.Layout
	b   *Backend
	uid int
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

// writesAs is the host uid and gid the sandbox's writes belong to.
func writesAs() (int, int) {
	if uid, gid := runAs(); uid > 0 {
		return uid, gid
	}
	return os.Getuid(), os.Getgid()
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	requireBwrap(t)
	f := &fixture{Layout: sandboxtest.NewLayout(t, "bwrap"), b: testBackend(t, mod)}
	f.uid, _ = writesAs()
	return f
}

// testBackend makes a backend that runs /bin/true unless told otherwise.
func testBackend(t testing.TB, mod func(*Config)) *Backend {
	t.Helper()
	requireBwrap(t)
	uid, gid := runAs()
	cfg := Config{RunAsUID: uid, RunAsGID: gid, Command: []string{"/bin/true"}}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func (f *fixture) spec() sandbox.Spec { return f.Spec() }

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
