// Package sandboxtest is the conformance suite every sandbox backend runs
// from its own tests (as containerd's snapshotter testsuite is for
// snapshotters): what the sandbox contract (DESIGN.md) promises, tried for
// real from inside a sandbox, said once. Only tests import it.
//
// A backend calls Run with its Params; where backends behave differently,
// the difference is a named parameter, and a property a backend cannot show
// is skipped with the reason in Params.Skip, never left out silently.
package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// Backend is what the suite drives: runner.Sandbox and the trial run of
// doctor. Spec.Command chooses what runs.
type Backend interface {
	Name() string
	Check(ctx context.Context) error
	Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error)
}

// Params is one backend's side of the suite.
type Params struct {
	// Name is what Backend.Name returns.
	Name string
	// New makes the backend under test, closing it in t.Cleanup; it skips t
	// with the reason when this machine cannot run the backend. The suite
	// runs every test on the one backend it returns.
	New func(t *testing.T) Backend
	// UID and GID are the host ids the sandbox's writes in the group's
	// folder and session dir belong to; on a root host the layout's
	// folders are theirs, as the runner arranges.
	UID, GID int
	// Env is what the backend itself adds to the allowlisted environment
	// ("PWD=/workspace/group").
	Env []string
	// StderrTail is how much of the end of stderr a Result keeps.
	StderrTail int
	// View is the backend's own rows of the view test (its root listing,
	// its init), run beside the shared ones.
	View []ViewCase
	// Pinned, when set, makes the backend as a root host runs it: every
	// bind source pinned under l.Pins (and idmapped, where the backend
	// does). It may give l's folders to another host user (Layout.SetOwner),
	// whom the sandbox's writes then belong to. The suite's Pinned tests
	// run on one, made for each test, and find l.Pins empty after each run.
	Pinned func(t *testing.T, l *Layout) Backend
	// AfterOpen, when set, sets b's test hook that runs once b has opened
	// (or pinned) its bind sources, before the sandbox binds them; a nil
	// hook unsets it.
	AfterOpen func(b Backend, hook func())
	// AfterRun, when set, runs after every Run of the suite: what of the
	// sandbox must be gone once Run returned (a container, a cgroup). The
	// suite itself looks for a test's processes on the host by their
	// command line; a backend whose sandboxed processes are not host
	// processes (gVisor's) checks here that they are gone.
	AfterRun func(t *testing.T, spec sandbox.Spec)
	// ReadOnlyError, when set, is the error a write into a read-only tree
	// the agent does not own (/usr, global) gives instead of
	// "Read-only file system": a kernel that checks the file's permissions
	// before the mount's flag.
	ReadOnlyError string
	// Skip names tests ("ProcessLimit/Reported", "View/hostname") the
	// backend cannot pass, each with the reason, which the test reports as
	// its skip message.
	Skip map[string]string
}

// ViewCase is a property of the sandbox's view: a shell script and what it
// must give.
type ViewCase struct {
	Name   string
	Script string
	Exit   int    // the exit code; -1: any but 0
	Out    string // the exact stdout, when set
	Stderr string // in stderr, when set
	// notOwned: a write into a read-only tree the agent does not own,
	// whose error may be Params.ReadOnlyError.
	notOwned bool
}

// Layout is a throw-away project tree under /tmp, reachable by the sandbox
// user: groups/team (the run's group), groups/other, groups/global,
// data/sessions/team, a fake host home with a planted key, and where the
// invocation's socket goes. On a root host what the sandbox may write
// belongs to the sandbox user, as the runner arranges; global too, so that
// its being read-only is shown to come from the mount.
type Layout struct {
	Base, Group, Other, Global, Session, Home, Sock string
	// Pins is where a pinning backend stages its binds.
	Pins string
	// UID and GID own what the sandbox may write, on a root host; -1:
	// the host's own user, who made it.
	UID, GID int
}

// NewLayout makes a Layout under /tmp/clawpen-<name>-test-*.
func NewLayout(t testing.TB, name string) *Layout {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "clawpen-"+name+"-test-")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = os.Chmod(base, 0o755)
		_ = os.RemoveAll(base)
	})
	require.NoError(t, os.Chmod(base, 0o755))
	l := &Layout{
		Base:    base,
		Group:   filepath.Join(base, "groups", "team"),
		Other:   filepath.Join(base, "groups", "other"),
		Global:  filepath.Join(base, "groups", "global"),
		Session: filepath.Join(base, "data", "sessions", "team"),
		Home:    filepath.Join(base, "home", "owner"),
		Sock:    filepath.Join(base, "data", "sockets", "inv.sock"),
		Pins:    filepath.Join(base, "pins"),
		UID:     -1,
		GID:     -1,
	}
	for _, d := range []string{l.Group, l.Other, l.Global, l.Session, filepath.Join(l.Home, ".ssh"), filepath.Dir(l.Sock)} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(l.Group, "ORIGINAL"), []byte("mine"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(l.Other, "OTHER_GROUP_SECRET"), []byte("theirs"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(l.Global, "MEMORY.md"), []byte("global"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(l.Home, ".ssh", "id_rsa"), []byte("FAKE PRIVATE KEY"), 0o644))
	if os.Getuid() == 0 {
		l.SetOwner(t, sandbox.UID, sandbox.GID)
	}
	return l
}

// SetOwner gives the group's, other group's, global and session folders to
// uid and gid, and makes them the owner Own gives to.
func (l *Layout) SetOwner(t testing.TB, uid, gid int) {
	t.Helper()
	l.UID, l.GID = uid, gid
	for _, d := range []string{l.Group, l.Global, l.Session, l.Other} {
		require.NoError(t, filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return l.Own(p)
		}))
	}
}

// Own gives path to the owner of what the sandbox may write (nothing to do
// when that is the host's own user).
func (l *Layout) Own(path string) error {
	if l.UID < 0 {
		return nil
	}
	return os.Lchown(path, l.UID, l.GID)
}

// Spec is a run of the layout's group, not main, with a fresh invocation id.
func (l *Layout) Spec() sandbox.Spec {
	var id [6]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	return sandbox.Spec{
		InvocationID: "test-" + hex.EncodeToString(id[:]),
		Group:        "team",
		GroupDir:     l.Group,
		GlobalDir:    l.Global,
		SessionDir:   l.Session,
		Env:          map[string]string{"TZ": "UTC", "CLAWPEN_ASSISTANT_NAME": "Andy"},
		Limits: sandbox.Limits{
			Timeout:     60 * time.Second,
			OutputBytes: 1 << 20,
			MemoryBytes: 256 << 20,
			Pids:        64,
			TmpBytes:    1 << 20,
		},
	}
}

// Marker is a unique token to find a test's processes by their command
// line. A number, so that it can be a sleep duration: 900.<random digits>.
func Marker() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "900." + strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 10)
}

// ProcessesWith lists the host's processes whose command line contains s,
// as "pid: command line".
func ProcessesWith(t testing.TB, s string) []string {
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

// Outcome is what one run gave.
type Outcome struct {
	Res    sandbox.Result
	Stdout string
	Err    error
}

// suite is one Run: the backend, shared by every test, and a fresh layout
// per test.
type suite struct {
	p     Params
	b     Backend
	known []string // the names of the tests and their subtests
	pins  string   // a pinning backend's staging dir, empty after each run
}

// test is one test of the suite; subs are the names of its subtests a
// backend may skip.
type test struct {
	name string
	subs []string
	f    func(t *testing.T, s *suite, l *Layout)
}

// Run runs the conformance suite on the backend p describes.
func Run(t *testing.T, p Params) {
	require.NotEmpty(t, p.Name, "Params.Name")
	require.NotNil(t, p.New, "Params.New")
	require.Positive(t, p.StderrTail, "Params.StderrTail")
	var known []string
	for _, tc := range tests {
		known = append(known, tc.name)
		for _, sub := range tc.subs {
			known = append(known, tc.name+"/"+sub)
		}
	}
	for _, v := range sharedView {
		known = append(known, "View/"+v.Name)
	}
	for name := range p.Skip {
		require.Contains(t, known, name, "Params.Skip names no test of the suite")
	}
	s := &suite{p: p, b: p.New(t), known: known}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.skip(t, tc.name)
			l := NewLayout(t, p.Name)
			if l.UID >= 0 && (l.UID != p.UID || l.GID != p.GID) {
				l.SetOwner(t, p.UID, p.GID)
			}
			tc.f(t, s, l)
		})
	}
}

// skip skips t when the backend said it cannot pass the test named name.
func (s *suite) skip(t *testing.T, name string) {
	t.Helper()
	if why, ok := s.p.Skip[name]; ok {
		t.Skip(s.p.Name + " cannot: " + why)
	}
}

// sub runs the subtest name of test parent, unless the backend skips it.
func (s *suite) sub(t *testing.T, parent, name string, f func(t *testing.T)) {
	t.Helper()
	if !slices.Contains(s.known, parent+"/"+name) {
		t.Fatalf("subtest %s/%s is not declared in the suite's table", parent, name)
	}
	t.Run(name, func(t *testing.T) {
		s.skip(t, parent+"/"+name)
		f(t)
	})
}

// sh runs script with /bin/sh -c in a sandbox for spec.
func (s *suite) sh(t *testing.T, spec sandbox.Spec, script string) Outcome {
	t.Helper()
	return s.cmd(t, spec, "/bin/sh", "-c", script)
}

// cmd runs command in a sandbox for spec, collecting its stdout unless
// spec.Stdout is set.
func (s *suite) cmd(t *testing.T, spec sandbox.Spec, command ...string) Outcome {
	t.Helper()
	return s.run(t, context.Background(), spec, command...)
}

func (s *suite) run(t *testing.T, ctx context.Context, spec sandbox.Spec, command ...string) Outcome {
	t.Helper()
	var out bytes.Buffer
	if spec.Stdout == nil {
		spec.Stdout = &out
	}
	spec.Command = command
	res, err := s.b.Run(ctx, spec)
	if s.p.AfterRun != nil {
		s.p.AfterRun(t, spec)
	}
	if s.pins != "" {
		entries, err := os.ReadDir(s.pins)
		if !os.IsNotExist(err) {
			require.NoError(t, err)
		}
		require.Empty(t, entries, "staging binds are released after the run")
	}
	return Outcome{Res: res, Stdout: out.String(), Err: err}
}
