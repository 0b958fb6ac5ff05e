package bwrap

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// newReuseV2 is newV2 whose sandbox cgroups have the event counters too.
func newReuseV2(t *testing.T) (*CgroupManager, fakeFS) {
	f, cfg := newV2(t, "cpu memory pids\n")
	files := maps.Clone(v2Files)
	files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"
	files["pids.events"] = "max 0\n"
	f.files = func(string) map[string]string { return files }
	m, err := openCgroups(cfg, f.cgroupHooks(false))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, f
}

var reuseLimits = cgroupLimits{MemoryBytes: 1 << 30, Pids: 256, CPUs: 1}

func TestCgroupKeptForTheGroupsNextSandbox(t *testing.T) {
	m, _ := newReuseV2(t)
	cg, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	require.NoError(t, cg.Release())
	assert.DirExists(t, cg.Dirs()[0], "an empty cgroup is kept")

	again, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	assert.Equal(t, cg.Name(), again.Name(), "the group's next sandbox gets it")

	other, err := m.Take("family", reuseLimits)
	require.NoError(t, err)
	assert.NotEqual(t, cg.Name(), other.Name(), "another group's sandbox never does")
}

func TestCgroupWithAProcessLeftIsRemovedNotKept(t *testing.T) {
	m, _ := newReuseV2(t)
	cg, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	require.NoError(t, cg.Attach(4242)) // still listed: not provably empty
	require.NoError(t, cg.Release())
	assert.NoDirExists(t, cg.Dirs()[0])

	next, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	assert.NotEqual(t, cg.Name(), next.Name())
}

func TestCgroupOfOtherLimitsIsNotReused(t *testing.T) {
	m, f := newReuseV2(t)
	cg, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	require.NoError(t, cg.Release())

	less := reuseLimits
	less.Pids = 33
	next, err := m.Take("main", less)
	require.NoError(t, err)
	assert.NotEqual(t, cg.Name(), next.Name())
	assert.NoDirExists(t, cg.Dirs()[0], "the kept one is removed")
	rel, err := filepath.Rel(f.root, filepath.Join(next.Dirs()[0], "pids.max"))
	require.NoError(t, err)
	assert.Equal(t, "33", f.read(t, rel))
}

// The kernel never resets a cgroup's event counters: a reused cgroup
// reports only what its own sandbox reached.
func TestReusedCgroupCountsLimitsFromItsRelease(t *testing.T) {
	m, _ := newReuseV2(t)
	cg, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	dir := cg.Dirs()[0]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.events"), []byte("oom 1\noom_kill 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 3\n"), 0o644))
	reached, err := cg.Reached()
	require.NoError(t, err)
	assert.Equal(t, sandbox.MemoryLimit, reached)
	require.NoError(t, cg.Release())

	again, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	require.Equal(t, cg.Name(), again.Name())
	reached, err = again.Reached()
	require.NoError(t, err)
	assert.Empty(t, reached, "the last sandbox's limits are not this one's")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 4\n"), 0o644))
	reached, err = again.Reached()
	require.NoError(t, err)
	assert.Equal(t, sandbox.ProcessLimit, reached)
}

func TestCloseRemovesKeptCgroups(t *testing.T) {
	m, _ := newReuseV2(t)
	kept, err := m.Take("main", reuseLimits)
	require.NoError(t, err)
	late, err := m.Take("family", reuseLimits)
	require.NoError(t, err)
	require.NoError(t, kept.Release())
	require.NoError(t, m.Close())
	assert.NoDirExists(t, kept.Dirs()[0])

	require.NoError(t, late.Release(), "a sandbox that ends after Close")
	assert.NoDirExists(t, late.Dirs()[0], "is not kept")
}

// With reuse on, a group's sandboxes run one after another in one cgroup,
// which Close removes.
func TestSandboxesOfAGroupShareTheirCgroup(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ReuseCgroups = true })
	var seen []string
	for range 2 {
		var out bytes.Buffer
		spec := f.spec()
		spec.Stdout = &out
		res, err := f.b.run(context.Background(), spec, []string{"/bin/true"})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		ents, err := os.ReadDir(f.b.cgroups.bases[0])
		require.NoError(t, err)
		var names []string
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "sb-") {
				names = append(names, e.Name())
			}
		}
		require.Len(t, names, 1, "one kept cgroup, empty")
		procs, err := os.ReadFile(filepath.Join(f.b.cgroups.bases[0], names[0], "cgroup.procs"))
		require.NoError(t, err)
		assert.Empty(t, strings.TrimSpace(string(procs)))
		seen = append(seen, names[0])
	}
	assert.Equal(t, seen[0], seen[1], "the second sandbox ran in the first one's cgroup")
	require.NoError(t, f.b.Close())
	for _, b := range f.b.cgroups.bases {
		assert.NoDirExists(t, filepath.Join(b, seen[0]))
	}
}

// What a sandbox's cgroup costs the host per run, made and removed, or
// kept and reused (release included): go test -run - -bench CgroupPerRun.
func BenchmarkCgroupPerRun(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to make cgroups")
	}
	m, err := OpenCgroups(CgroupConfig{})
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	for _, key := range []string{"", "main"} {
		name := "fresh"
		if key != "" {
			name = "reused"
		}
		b.Run(name, func(b *testing.B) {
			cpu0 := selfCPU(b)
			for b.Loop() {
				cg, err := m.Take(key, reuseLimits)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cg.Reached(); err != nil {
					b.Fatal(err)
				}
				if err := cg.Release(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(selfCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// selfCPU is this process's user and system CPU time so far, in ns.
func selfCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
