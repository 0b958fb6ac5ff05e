package bwrap

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// When the limits cannot be set, the sandbox is killed before the command
// runs: nothing executes without its limits.
func TestReleaseFailureRunsNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.b.beforeRelease = func() error { return errors.New("planted release failure") }
	o := f.sh(t, f.spec(), "echo ran > /workspace/group/ran")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "planted release failure")
	_, err := os.Stat(filepath.Join(f.Group, "ran"))
	assert.True(t, os.IsNotExist(err), "the command ran although its limits were never set")

	// The backend is fine afterwards.
	f.b.beforeRelease = nil
	o = f.sh(t, f.spec(), "echo alive")
	require.NoError(t, o.err)
	assert.Equal(t, "alive\n", o.stdout)
}

// A real sandbox is in a cgroup of its own, which is the root of its cgroup
// namespace: from inside, /proc/self/cgroup shows "/" and nothing of the
// host's tree. From the host, its processes are in a sandbox cgroup whose
// files hold the spec's limits while it runs; after the run it is gone.
func TestCgroupLimitsReadBackFromInside(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec()
	spec.Limits.MemoryBytes = 300 << 20
	spec.Limits.Pids = 77
	spec.Limits.CPUs = 0.5
	pr, pw := io.Pipe()
	spec.Stdout = pw
	done := make(chan outcome, 1)
	mark := sandboxtest.Marker()
	go func() {
		res, err := f.b.run(context.Background(), spec, []string{"/bin/sh", "-c",
			"cat /proc/self/cgroup; echo READY; while [ ! -e /workspace/group/go ]; do sleep 0.02; done; echo finished " + mark})
		_ = pw.Close()
		done <- outcome{res: res, err: err}
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() && sc.Text() != "READY" {
		parts := strings.SplitN(sc.Text(), ":", 3)
		require.Len(t, parts, 3, sc.Text())
		assert.Equal(t, "/", parts[2], "the sandbox sees its own cgroup as the root: %s", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	// The shell, as the host sees it.
	var pid string
	for _, p := range sandboxtest.ProcessesWith(t, mark) {
		if n, cmd, _ := strings.Cut(p, ": "); strings.HasPrefix(cmd, "/bin/sh ") {
			pid = n
		}
	}
	require.NotEmpty(t, pid, "the sandbox's shell")
	theirs, err := os.ReadFile("/proc/" + pid + "/cgroup")
	require.NoError(t, err)
	hostDir := func(ctrl string) string {
		for _, line := range strings.Split(strings.TrimSpace(string(theirs)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			for _, c := range strings.Split(parts[1], ",") {
				if c == ctrl {
					if ctrl == "" {
						return filepath.Join("/sys/fs/cgroup", parts[2])
					}
					return filepath.Join("/sys/fs/cgroup", ctrl, parts[2])
				}
			}
		}
		t.Fatalf("the sandbox has no %q cgroup", ctrl)
		return ""
	}
	read := func(dir, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	var dirs []string
	if f.b.cgroups.Mode() == CgroupV2 {
		d := hostDir("")
		dirs = append(dirs, d)
		assert.Equal(t, "314572800", read(d, "memory.max"))
		assert.Equal(t, "77", read(d, "pids.max"))
		assert.Equal(t, "50000 100000", read(d, "cpu.max"))
	} else {
		mem, pids, cpu := hostDir("memory"), hostDir("pids"), hostDir("cpu")
		dirs = append(dirs, mem, pids, cpu)
		assert.Equal(t, "314572800", read(mem, "memory.limit_in_bytes"))
		if _, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil {
			assert.Equal(t, "314572800", read(mem, "memory.memsw.limit_in_bytes"), "no swap on top")
		}
		assert.Equal(t, "77", read(pids, "pids.max"))
		assert.Equal(t, "50000", read(cpu, "cpu.cfs_quota_us"))
		assert.Equal(t, "100000", read(cpu, "cpu.cfs_period_us"))
	}
	for _, d := range dirs {
		assert.Contains(t, d, "/sb-", "a sandbox cgroup, not the host's")
		// bwrap, its namespace init, sh and the sleep loop's processes.
		assert.GreaterOrEqual(t, len(strings.Fields(read(d, "cgroup.procs"))), 3, d)
	}

	require.NoError(t, os.WriteFile(filepath.Join(f.Group, "go"), nil, 0o644))
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	for _, d := range dirs {
		assert.NoDirExists(t, d, "the sandbox's cgroup is removed after the run")
	}
}

// A backend that cannot make cgroups refuses to exist: nothing runs without
// its limits.
func TestNoCgroupNoBackend(t *testing.T) {
	requireBwrap(t)
	u, g := runAs()
	_, err := New(Config{RunAsUID: u, RunAsGID: g, AgentBin: "/usr/bin/true", CgroupName: "../escape"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no cgroup for sandboxes")
}

// When a run's cgroup cannot be made (here: the host's cgroup directory is
// gone), the sandbox is killed before its command runs.
func TestCgroupFailureRunsNothing(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, f.b.cgroups.Close())
	o := f.sh(t, f.spec(), "echo ran > /workspace/group/ran")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "make the sandbox's cgroup")
	_, err := os.Stat(filepath.Join(f.Group, "ran"))
	assert.True(t, os.IsNotExist(err), "the command ran without its cgroup")
}
