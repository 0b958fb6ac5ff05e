package bwrap

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/cgroup"
)

// The v2 path cannot run on a v1 host, so it is tested against a directory
// tree laid out like cgroupfs: mkdir creates the interface files the kernel
// would, and every write lands in a plain file that the test reads back.

var v2Files = map[string]string{
	"cgroup.procs": "", "cgroup.subtree_control": "", "cgroup.kill": "", "cgroup.events": "populated 0\n",
	"cgroup.controllers": "cpuset cpu io memory hugetlb pids\n",
	"memory.max":         "max\n", "memory.swap.max": "max\n", "pids.max": "max\n", "cpu.max": "max 100000\n", "io.bfq.weight": "100\n",
}

var v1Files = map[string]map[string]string{
	"memory": {"cgroup.procs": "", "memory.limit_in_bytes": "", "memory.memsw.limit_in_bytes": "", "memory.swappiness": "60\n"},
	"pids":   {"cgroup.procs": "", "pids.max": "max\n"},
	"cpu":    {"cgroup.procs": "", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n"},
	"blkio":  {"cgroup.procs": "", "blkio.bfq.weight": "100\n"},
}

type fakeFS struct {
	t     *testing.T
	root  string
	files func(dir string) map[string]string
}

func (f fakeFS) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for name, content := range f.files(dir) {
		require.NoError(f.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return nil
}

func (f fakeFS) cgroupHooks(bfq bool) cgroupHooks {
	return cgroupHooks{mkdir: f.mkdir, rmdir: f.rmdir, bfq: func() bool { return bfq }}
}

func (f fakeFS) rmdir(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func (f fakeFS) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, rel))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// newV2 lays out a unified hierarchy with the host in /system.slice/clawpen.service.
func newV2(t *testing.T, controllers string) (fakeFS, CgroupConfig) {
	root := t.TempDir()
	f := fakeFS{t: t, root: root, files: func(string) map[string]string { return v2Files }}
	own := filepath.Join(root, "system.slice", "clawpen.service")
	require.NoError(t, os.MkdirAll(own, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte(controllers), 0o644))
	for name, content := range v2Files {
		require.NoError(t, os.WriteFile(filepath.Join(own, name), []byte(content), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(own, "cgroup.controllers"), []byte(controllers), 0o644))
	proc := filepath.Join(t.TempDir(), "cgroup")
	require.NoError(t, os.WriteFile(proc, []byte("0::/system.slice/clawpen.service\n"), 0o644))
	return f, CgroupConfig{Name: "clawpen-test", Root: root, ProcCgroup: proc}
}

func TestV2MovesHostToLeafAndWritesLimits(t *testing.T) {
	f, cfg := newV2(t, "cpuset cpu io memory hugetlb pids\n")
	m, err := openCgroups(cfg, f.cgroupHooks(true))
	require.NoError(t, err)
	assert.Equal(t, CgroupV2, m.Mode())
	assert.Contains(t, m.Describe(), "memory, pids, cpu, io")

	svc := "system.slice/clawpen.service"
	assert.Equal(t, strconv.Itoa(os.Getpid()), f.read(t, svc+"/"+cgroupHostLeaf+"/cgroup.procs"), "the host moved into its leaf")
	assert.Equal(t, "+memory +pids +cpu +io", f.read(t, svc+"/cgroup.subtree_control"))
	assert.Equal(t, "+memory +pids +cpu +io", f.read(t, svc+"/clawpen-test/cgroup.subtree_control"))

	cg, err := m.New(cgroupLimits{MemoryBytes: 1 << 30, Pids: 256, CPUs: 1.5})
	require.NoError(t, err)
	require.Len(t, cg.Dirs(), 1)
	dir := svc + "/clawpen-test/" + cg.Name()
	for file, want := range map[string]string{
		"memory.max": "1073741824", "memory.swap.max": "0", "pids.max": "256", "cpu.max": "150000 100000", "io.bfq.weight": "50",
	} {
		assert.Equal(t, want, f.read(t, dir+"/"+file), file)
	}
	require.NoError(t, cg.Attach(4242))
	assert.Equal(t, "4242", f.read(t, dir+"/cgroup.procs"))
	require.NoError(t, os.WriteFile(filepath.Join(f.root, dir, "cgroup.procs"), nil, 0o644)) // the process exited

	require.NoError(t, cg.Remove())
	assert.NoDirExists(t, filepath.Join(f.root, dir))
	require.NoError(t, m.Close())
	assert.NoDirExists(t, filepath.Join(f.root, svc, "clawpen-test"))
}

// A second Open in the same process finds itself in the leaf and still
// uses its own cgroup, not the leaf, as the parent.
func TestV2SecondOpenFromLeaf(t *testing.T) {
	f, cfg := newV2(t, "cpu memory pids\n")
	require.NoError(t, os.WriteFile(cfg.ProcCgroup, []byte("0::/system.slice/clawpen.service/"+cgroupHostLeaf+"\n"), 0o644))
	require.NoError(t, f.mkdir(filepath.Join(f.root, "system.slice/clawpen.service", cgroupHostLeaf)))
	m, err := openCgroups(cfg, f.cgroupHooks(true))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(f.root, "system.slice/clawpen.service/clawpen-test")}, m.bases)
	assert.Equal(t, "+memory +pids +cpu", f.read(t, "system.slice/clawpen.service/cgroup.subtree_control"), "no io controller offered: none asked for")
}

// Without a disk scheduled by weight, the I/O controller is left alone.
func TestNoIOControllerWithoutBFQ(t *testing.T) {
	f, cfg := newV2(t, "cpu io memory pids\n")
	m, err := openCgroups(cfg, f.cgroupHooks(false))
	require.NoError(t, err)
	assert.NotContains(t, m.Describe(), "io")
	f1, cfg1 := newV1(t, true)
	m, err = openCgroups(cfg1, f1.cgroupHooks(false))
	require.NoError(t, err)
	assert.NotContains(t, m.Describe(), "blkio")
}

func TestV2MissingControllerFailsWithFix(t *testing.T) {
	f, cfg := newV2(t, "memory io\n")
	_, err := openCgroups(cfg, f.cgroupHooks(true))
	var ce *CgroupError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Reason, `controller "pids" is not available`)
	assert.Contains(t, ce.Fix, "Delegate=yes")
}

func TestLeftoversOfTheSameNameAreRemoved(t *testing.T) {
	f, cfg := newV2(t, "cpu memory pids\n")
	base := filepath.Join(f.root, "system.slice/clawpen.service/clawpen-test")
	require.NoError(t, f.mkdir(base))
	require.NoError(t, f.mkdir(filepath.Join(base, "sb-left")))
	_, err := openCgroups(cfg, f.cgroupHooks(true))
	require.NoError(t, err)
	assert.NoDirExists(t, filepath.Join(base, "sb-left"))
	assert.DirExists(t, base)
}

// newV1 lays out a hybrid host: one hierarchy per controller, the host in
// memory:/job/42 and the root of the others.
func newV1(t *testing.T, withMemsw bool) (fakeFS, CgroupConfig) {
	root := t.TempDir()
	f := fakeFS{t: t, root: root, files: func(dir string) map[string]string {
		rel, err := filepath.Rel(root, dir)
		require.NoError(t, err)
		files := map[string]string{}
		for k, v := range v1Files[strings.Split(rel, string(filepath.Separator))[0]] {
			files[k] = v
		}
		if !withMemsw {
			delete(files, "memory.memsw.limit_in_bytes")
		}
		return files
	}}
	for ctrl := range v1Files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, ctrl), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, ctrl, "cgroup.procs"), nil, 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "memory", "job", "42"), 0o755))
	proc := filepath.Join(t.TempDir(), "cgroup")
	require.NoError(t, os.WriteFile(proc, []byte("9:name=systemd:/\n8:pids:/\n7:blkio:/\n4:memory:/job/42\n1:cpu,cpuacct:/\n0::/\n"), 0o644))
	return f, CgroupConfig{Name: "clawpen-test", Root: root, ProcCgroup: proc}
}

func TestV1WritesEachHierarchy(t *testing.T) {
	for _, memsw := range []bool{true, false} {
		t.Run("memsw="+strconv.FormatBool(memsw), func(t *testing.T) {
			f, cfg := newV1(t, memsw)
			m, err := openCgroups(cfg, f.cgroupHooks(true))
			require.NoError(t, err)
			assert.Equal(t, CgroupV1, m.Mode())
			cg, err := m.New(cgroupLimits{MemoryBytes: 512 << 20, Pids: 64, CPUs: 0.5})
			require.NoError(t, err)
			want := map[string]string{
				"memory/job/42/clawpen-test/" + cg.Name() + "/memory.limit_in_bytes": "536870912",
				"pids/clawpen-test/" + cg.Name() + "/pids.max":                       "64",
				"cpu/clawpen-test/" + cg.Name() + "/cpu.cfs_quota_us":                "50000",
				"blkio/clawpen-test/" + cg.Name() + "/blkio.bfq.weight":              "50",
			}
			if memsw {
				want["memory/job/42/clawpen-test/"+cg.Name()+"/memory.memsw.limit_in_bytes"] = "536870912"
				want["memory/job/42/clawpen-test/"+cg.Name()+"/memory.swappiness"] = "60" // untouched
			} else {
				want["memory/job/42/clawpen-test/"+cg.Name()+"/memory.swappiness"] = "0"
			}
			for file, v := range want {
				assert.Equal(t, v, f.read(t, file), file)
			}
			require.NoError(t, cg.Attach(4242))
			for _, d := range cg.Dirs() {
				b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				require.NoError(t, err)
				assert.Equal(t, "4242", string(b), d)
				require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), nil, 0o644))
			}
			require.NoError(t, cg.Remove())
			for _, d := range cg.Dirs() {
				assert.NoDirExists(t, d)
			}
			require.NoError(t, m.Close())
		})
	}
}

func TestV1MissingControllerFailsWithFix(t *testing.T) {
	f, cfg := newV1(t, true)
	require.NoError(t, os.RemoveAll(filepath.Join(f.root, "pids")))
	_, err := openCgroups(cfg, f.cgroupHooks(true))
	var ce *CgroupError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Reason, `controller "pids" is not mounted`)
	assert.Contains(t, ce.Fix, "mount -t cgroup -o pids")
}

func TestNoCgroupFilesystem(t *testing.T) {
	proc := filepath.Join(t.TempDir(), "cgroup")
	require.NoError(t, os.WriteFile(proc, []byte("0::/\n"), 0o644))
	_, err := OpenCgroups(CgroupConfig{Root: t.TempDir(), ProcCgroup: proc})
	var ce *CgroupError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "no cgroup filesystem")
	assert.NotEmpty(t, ce.Fix)
}

func TestLimitsMustBeSet(t *testing.T) {
	f, cfg := newV2(t, "cpu memory pids\n")
	m, err := openCgroups(cfg, f.cgroupHooks(true))
	require.NoError(t, err)
	for _, lim := range []cgroupLimits{{Pids: 1, CPUs: 1}, {MemoryBytes: 1, CPUs: 1}, {MemoryBytes: 1, Pids: 1}} {
		_, err := m.New(lim)
		assert.Error(t, err, "%+v", lim)
	}
}

func TestCPUQuotaHasAFloor(t *testing.T) {
	m := &CgroupManager{mode: CgroupV2, ctrls: []controller{{name: "cpu", base: "/b"}}, has: map[string]bool{}}
	ws := m.limitWrites(cgroupLimits{MemoryBytes: 1, Pids: 1, CPUs: 0.001})
	require.Len(t, ws, 1)
	assert.Equal(t, "1000 100000", ws[0].value)
}

// On this host's real cgroupfs (root only): a process attached to a sandbox
// cgroup is in it, the limits read back from the files the kernel shows, and
// Remove kills the process and removes every directory.
func TestRealCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root (or a delegated cgroup)")
	}
	m, err := OpenCgroups(CgroupConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	t.Log(m.Describe())

	cg, err := m.New(cgroupLimits{MemoryBytes: 300 << 20, Pids: 33, CPUs: 0.25})
	require.NoError(t, err)
	cmd := exec.Command("/bin/sleep", "1000")
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	require.NoError(t, cg.Attach(cmd.Process.Pid))

	procCgroup, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	require.NoError(t, err)
	for _, d := range cg.Dirs() {
		pids, err := cgroup.Procs(d)
		require.NoError(t, err)
		assert.Equal(t, []int{cmd.Process.Pid}, pids, d)
	}
	assert.Contains(t, string(procCgroup), "/"+cg.Name()+"\n")

	read := func(name string) string {
		for _, d := range cg.Dirs() {
			if b, err := os.ReadFile(filepath.Join(d, name)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
		t.Fatalf("no %s in %v", name, cg.Dirs())
		return ""
	}
	switch m.Mode() {
	case CgroupV1:
		assert.Equal(t, "314572800", read("memory.limit_in_bytes"))
		assert.Equal(t, "33", read("pids.max"))
		assert.Equal(t, "25000", read("cpu.cfs_quota_us"))
	case CgroupV2:
		assert.Equal(t, "314572800", read("memory.max"))
		assert.Equal(t, "33", read("pids.max"))
		assert.Equal(t, "25000 100000", read("cpu.max"))
	}

	require.NoError(t, cg.Remove())
	err = <-waited
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "sleep ended: %v", err)
	assert.Equal(t, "signal: killed", ee.Error())
	for _, d := range cg.Dirs() {
		assert.NoDirExists(t, d)
	}
}

// The cost a sandbox run pays for its cgroup: make it with limits, move a
// process in, and remove it once the process has exited, as Run does after
// the namespace is gone (root only; the process's start and end are not timed).
func BenchmarkSandboxCgroup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("making cgroups needs root (or a delegated cgroup)")
	}
	m, err := OpenCgroups(CgroupConfig{})
	require.NoError(b, err)
	defer func() { require.NoError(b, m.Close()) }()
	for b.Loop() {
		b.StopTimer()
		cmd := exec.Command("/bin/sleep", "1000")
		require.NoError(b, cmd.Start())
		b.StartTimer()
		cg, err := m.New(cgroupLimits{MemoryBytes: 1 << 30, Pids: 256, CPUs: 1})
		require.NoError(b, err)
		require.NoError(b, cg.Attach(cmd.Process.Pid))
		b.StopTimer()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.StartTimer()
		require.NoError(b, cg.Remove())
	}
}

// What starting a process inside a sandbox cgroup adds to starting it (v1:
// the thread's moves into the cgroup and back; v2: clone3 into it): each
// iteration starts and reaps /bin/true, plainly and through Cgroup.Start
// (root only).
func BenchmarkStartInCgroup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("making cgroups needs root (or a delegated cgroup)")
	}
	m, err := OpenCgroups(CgroupConfig{})
	require.NoError(b, err)
	defer func() { require.NoError(b, m.Close()) }()
	cg, err := m.New(cgroupLimits{MemoryBytes: 1 << 30, Pids: 256, CPUs: 1})
	require.NoError(b, err)
	for _, tc := range []struct {
		name  string
		start func(*exec.Cmd) error
	}{
		{"plain", (*exec.Cmd).Start},
		{"in-cgroup", func(c *exec.Cmd) error { return cg.Start(c, (*exec.Cmd).Start) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				require.NoError(b, tc.start(cmd))
				require.NoError(b, cmd.Wait())
			}
		})
	}
}

// A process started through Cgroup.Start is in the cgroup from its first
// instruction (its /proc/self/cgroup, read by itself, names it), and the
// host's thread that started it is back in the host's own cgroup.
func TestStartInCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root (or a delegated cgroup)")
	}
	m, err := OpenCgroups(CgroupConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	cg, err := m.New(cgroupLimits{MemoryBytes: 300 << 20, Pids: 33, CPUs: 0.25})
	require.NoError(t, err)
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cg.Start(cmd, (*exec.Cmd).Start))
	require.NoError(t, cmd.Wait())
	for _, c := range m.ctrls {
		want := filepath.Join(c.base, cg.Name())
		found := false
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if strings.HasSuffix(want, parts[2]) && strings.HasSuffix(parts[2], "/"+cg.Name()) {
				found = true
			}
		}
		assert.True(t, found, "%s: %s", want, out.String())
	}
	for _, d := range cg.Dirs() {
		pids, err := cgroup.Procs(d)
		require.NoError(t, err)
		assert.Empty(t, pids, "nothing of the host stays in %s", d)
	}
	require.NoError(t, cg.Remove())
}

// On cgroup v2 the kernel places the child at its birth (clone3 with
// CLONE_INTO_CGROUP). This host's cgroups are v1, but its unified hierarchy,
// without controllers, takes a process all the same: the child names the
// cgroup as its own from its first instruction.
func TestStartInCgroupV2(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	root := unified
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		root = "/sys/fs/cgroup"
	} else if !exists(filepath.Join(unified, "cgroup.procs")) {
		t.Skip("no cgroup v2 hierarchy here")
	}
	own, err := cgroup.Own("/proc/self/cgroup")
	require.NoError(t, err)
	base := filepath.Join(root, own[""], "clawpen-test-"+randomHex(4))
	dir := filepath.Join(base, "sb-test")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() { _ = os.Remove(dir); _ = os.Remove(base) })
	cg := &Cgroup{m: &CgroupManager{mode: CgroupV2, bases: []string{base}}, name: "sb-test", dirs: []string{dir}}

	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cg.Start(cmd, (*exec.Cmd).Start))
	require.NoError(t, cmd.Wait())
	assert.Contains(t, out.String(), "0::"+strings.TrimPrefix(dir, root)+"\n")
}
