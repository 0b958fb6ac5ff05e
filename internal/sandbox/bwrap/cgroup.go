package bwrap

// Each sandbox gets a cgroup of its own, made by the host under its own
// (delegated) cgroup, with limits on memory (tmpfs, shared memory and memfd
// included, no swap on top), processes, CPU time and, where the kernel offers
// it, I/O weight. Both cgroup v2 (unified) and v1 (one hierarchy per
// controller, as on hybrid hosts) are handled.
//
// Layout, under the host's own cgroup in each hierarchy it uses:
//
//	<own>/<instance>/<sandbox>
//
// <instance> is one host's directory (CgroupConfig.Name); a host that restarts
// with the same name removes what a crash left there. On v2 the host first moves
// itself into the leaf <own>/clawpen-host: a cgroup that holds processes
// cannot enable controllers for its children (the "no internal processes"
// rule).

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/cgroup"
)

// CgroupMode is how sandbox cgroups are made on this host.
type CgroupMode string

// Modes.
const (
	CgroupV1 CgroupMode = "v1"
	CgroupV2 CgroupMode = "v2"
)

// cgroupLimits are one sandbox's.
type cgroupLimits struct {
	MemoryBytes int64   // RAM incl. tmpfs, shm and memfd; swap stays off on top
	Pids        int     // processes and threads
	CPUs        float64 // CPU time per wall time: 1.5 = one and a half CPUs
}

// cgroupIOWeight is the sandboxes' share of disk time where a disk is scheduled by
// weight (bfq; its default is 100): a busy sandbox does not starve the host.
// Without bfq the I/O controller is not used at all.
const cgroupIOWeight = 50

// cpuPeriod is the CFS period in microseconds (the kernel's default).
const cpuPeriod = 100_000

// cgroupHostLeaf is the v2 leaf cgroup the host moves itself into.
const cgroupHostLeaf = "clawpen-host"

// CgroupConfig says where the cgroup filesystem is and how to name the host's
// directory.
type CgroupConfig struct {
	// Name is this host's directory under its own cgroup. The same name on
	// the next start removes what is left there; two live hosts must not
	// share it. Empty: a fresh random name (removed by Close).
	Name string
	// Root is where the cgroup filesystem is mounted; default /sys/fs/cgroup.
	Root string
	// ProcCgroup is the host's /proc/<pid>/cgroup; default /proc/self/cgroup.
	ProcCgroup string
}

// CgroupError says why no sandbox cgroup can be made here and how to fix it.
type CgroupError struct {
	Reason string
	Fix    string
	Err    error
}

func (e *CgroupError) Error() string {
	msg := "no cgroup for sandboxes: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		msg += " (fix: " + e.Fix + ")"
	}
	return msg
}

func (e *CgroupError) Unwrap() error { return e.Err }

// Fixes named by errors.
const (
	fixRootV2 = "run clawpen as root, or in a cgroup delegated to its user: " +
		"a systemd unit with Delegate=yes, or `systemd-run --user --scope -p Delegate=yes clawpen serve`"
	fixRootV1 = "run clawpen as root (cgroup v1 cannot be safely delegated to a user), " +
		"or boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and run it with Delegate=yes"
	fixV1Mount = "mount the v1 controller (e.g. `mount -t cgroup -o %[1]s cgroup /sys/fs/cgroup/%[1]s`), " +
		"or boot with the unified hierarchy (systemd.unified_cgroup_hierarchy=1)"
	fixV2Delegate = "delegate the controllers to clawpen's cgroup: Delegate=yes in its systemd unit " +
		"(or `systemd-run --scope -p Delegate=yes clawpen serve`), or enable them in the parent's cgroup.subtree_control"
)

// controller is one resource controller and the directory of this host's
// instance in its hierarchy (v2: the one directory, shared by all).
type controller struct {
	name string
	base string // <own>/<instance>
}

// CgroupManager makes sandbox cgroups under the host's instance directory.
type CgroupManager struct {
	mode  CgroupMode
	name  string
	ctrls []controller // v2: one entry per controller, all with the same base
	bases []string     // distinct instance directories
	// has lists the optional interface files this kernel offers, seen in the
	// instance directories (a sandbox cgroup has the same): a run then
	// writes without probing.
	has map[string]bool
	cgroupHooks

	// idle are the cgroups kept for each key's next sandbox (Take,
	// Release); closed: Close ran, none is kept any more.
	idleMu sync.Mutex
	idle   map[string]*Cgroup
	closed bool
}

// cgroupHooks are what tests replace: a directory tree that mimics cgroupfs has no
// interface files of its own (mkdir) and cannot be removed while it has files
// (rmdir); bfq says whether any disk is scheduled by weight.
type cgroupHooks struct {
	mkdir func(string) error
	rmdir func(string) error
	bfq   func() bool
}

// Open finds this host's cgroups, checks that sandbox cgroups can be made
// there with every required controller (memory, pids, cpu), removes what a
// previous host of the same name left, and creates the instance directory.
// An error is a *CgroupError.
func OpenCgroups(cfg CgroupConfig) (*CgroupManager, error) {
	return openCgroups(cfg, cgroupHooks{mkdir: func(p string) error { return os.Mkdir(p, 0o755) }, rmdir: os.Remove, bfq: bfqInUse})
}

func openCgroups(cfg CgroupConfig, h cgroupHooks) (*CgroupManager, error) {
	if cfg.Root == "" {
		cfg.Root = "/sys/fs/cgroup"
	}
	if cfg.ProcCgroup == "" {
		cfg.ProcCgroup = "/proc/self/cgroup"
	}
	if cfg.Name == "" {
		cfg.Name = "clawpen-" + randomHex(6)
	}
	if !validName(cfg.Name) || cfg.Name == cgroupHostLeaf {
		return nil, &CgroupError{Reason: fmt.Sprintf("invalid cgroup name %q", cfg.Name)}
	}
	own, err := cgroup.Own(cfg.ProcCgroup)
	if err != nil {
		return nil, &CgroupError{Reason: "read the host's cgroup", Err: err}
	}
	m := &CgroupManager{name: cfg.Name, cgroupHooks: h, has: map[string]bool{}, idle: map[string]*Cgroup{}}
	switch {
	case exists(filepath.Join(cfg.Root, "cgroup.controllers")):
		m.mode = CgroupV2
		err = m.openV2(cfg.Root, own)
	case exists(filepath.Join(cfg.Root, "memory", "cgroup.procs")):
		m.mode = CgroupV1
		err = m.openV1(cfg.Root, own)
	default:
		return nil, &CgroupError{Reason: "no cgroup filesystem with a memory controller at " + cfg.Root,
			Fix: "mount cgroup2 at /sys/fs/cgroup (`mount -t cgroup2 none /sys/fs/cgroup`), or run clawpen where cgroups are available"}
	}
	if err != nil {
		return nil, err
	}
	if err := m.makeBases(); err != nil {
		_ = m.Close() // what was made of the instance directories
		return nil, err
	}
	for _, w := range m.limitWrites(cgroupLimits{MemoryBytes: 1, Pids: 1, CPUs: 1}) {
		if w.optional && exists(filepath.Join(w.base, w.file)) {
			m.has[w.file] = true
		}
	}
	return m, nil
}

// makeBases empties the instance directories of a previous host of the same
// name, or creates them.
func (m *CgroupManager) makeBases() error {
	for _, b := range m.bases {
		if err := m.clear(b); err != nil {
			return &CgroupError{Reason: "remove sandbox cgroups left in " + b, Err: err}
		}
		if err := m.mkdir(b); err != nil && !errors.Is(err, os.ErrExist) {
			return m.permError("create cgroup "+b, err)
		}
	}
	if m.mode == CgroupV2 {
		// Children of the instance directory get the same controllers.
		if err := cgroup.Write(filepath.Join(m.bases[0], "cgroup.subtree_control"), m.enableLine()); err != nil {
			return &CgroupError{Reason: "enable controllers in " + m.bases[0], Fix: fixV2Delegate, Err: err}
		}
	}
	return nil
}

// openV1 finds the host's cgroup in each controller's hierarchy.
func (m *CgroupManager) openV1(root string, own map[string]string) error {
	for _, c := range []struct {
		name     string
		required bool
	}{{"memory", true}, {"pids", true}, {"cpu", true}, {"blkio", false}} {
		dir := filepath.Join(root, c.name)
		p, ok := own[c.name]
		if !exists(filepath.Join(dir, "cgroup.procs")) || !ok {
			if c.required {
				return &CgroupError{Reason: fmt.Sprintf("cgroup v1 controller %q is not mounted at %s", c.name, dir), Fix: fmt.Sprintf(fixV1Mount, c.name)}
			}
			continue
		}
		if c.name == "blkio" && !m.bfq() {
			continue // weights do nothing without a weight-based disk scheduler
		}
		base := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+p)), m.name)
		m.ctrls = append(m.ctrls, controller{name: c.name, base: base})
		m.bases = append(m.bases, base)
	}
	return nil
}

// openV2 moves the host into a leaf of its own cgroup and enables the
// controllers for the cgroups it makes.
func (m *CgroupManager) openV2(root string, own map[string]string) error {
	p, ok := own[""]
	if !ok {
		return &CgroupError{Reason: "the host's cgroup v2 path is not in /proc/self/cgroup"}
	}
	p = path.Clean("/" + p)
	if path.Base(p) == cgroupHostLeaf {
		p = path.Dir(p) // moved there by an earlier Open in this process
	}
	ownDir := filepath.Join(root, filepath.FromSlash(p))
	avail, err := os.ReadFile(filepath.Join(ownDir, "cgroup.controllers"))
	if err != nil {
		return &CgroupError{Reason: "read the controllers of " + ownDir, Err: err}
	}
	have := map[string]bool{}
	for _, c := range strings.Fields(string(avail)) {
		have[c] = true
	}
	base := filepath.Join(ownDir, m.name)
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !have[c] {
			return &CgroupError{Reason: fmt.Sprintf("controller %q is not available in %s (it has: %s)", c, ownDir, strings.TrimSpace(string(avail))), Fix: fixV2Delegate}
		}
		m.ctrls = append(m.ctrls, controller{name: c, base: base})
	}
	if have["io"] && m.bfq() {
		m.ctrls = append(m.ctrls, controller{name: "io", base: base})
	}
	m.bases = []string{base}

	leaf := filepath.Join(ownDir, cgroupHostLeaf)
	if err := m.mkdir(leaf); err != nil && !errors.Is(err, os.ErrExist) {
		return m.permError("create the host's leaf cgroup "+leaf, err)
	}
	if err := cgroup.Write(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return m.permError("move the host into "+leaf, err)
	}
	if err := cgroup.Write(filepath.Join(ownDir, "cgroup.subtree_control"), m.enableLine()); err != nil {
		if errors.Is(err, unix.EBUSY) {
			procs, _ := os.ReadFile(filepath.Join(ownDir, "cgroup.procs"))
			return &CgroupError{Reason: fmt.Sprintf("%s still holds other processes (%s), so it cannot enable controllers for children",
				ownDir, strings.Join(strings.Fields(string(procs)), " ")),
				Fix: "start clawpen in a cgroup of its own: a systemd unit with Delegate=yes, `systemd-run --scope -p Delegate=yes clawpen serve`, " +
					"or as the only process of its container (no --init)", Err: err}
		}
		return &CgroupError{Reason: "enable controllers in " + ownDir, Fix: fixV2Delegate, Err: err}
	}
	return nil
}

func (m *CgroupManager) enableLine() string {
	var s []string
	for _, c := range m.ctrls {
		s = append(s, "+"+c.name)
	}
	return strings.Join(s, " ")
}

// CgroupMode is CgroupV1 or CgroupV2.
func (m *CgroupManager) Mode() CgroupMode { return m.mode }

// Describe names the mode, the controllers and where the cgroups are made.
func (m *CgroupManager) Describe() string {
	var names []string
	for _, c := range m.ctrls {
		names = append(names, c.name)
	}
	if m.mode == CgroupV2 {
		return fmt.Sprintf("cgroup v2, delegated: %s under %s", strings.Join(names, ", "), m.bases[0])
	}
	return fmt.Sprintf("cgroup v1: %s under %s", strings.Join(names, ", "), strings.Join(m.bases, ", "))
}

// Close removes every sandbox cgroup of this host (killing what is left in
// them) and the instance directory.
func (m *CgroupManager) Close() error {
	errs := []error{m.dropIdle()}
	for _, b := range m.bases {
		if err := m.clear(b); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.rmdir(b); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", b, err))
		}
	}
	return errors.Join(errs...)
}

// clear removes every sandbox cgroup under base.
func (m *CgroupManager) clear(base string) error {
	ents, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", base, err)
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, cgroup.Remove(filepath.Join(base, e.Name()), m.rmdir))
		}
	}
	return errors.Join(errs...)
}

// Cgroup is one sandbox's cgroup (one directory per hierarchy on v1).
type Cgroup struct {
	m    *CgroupManager
	name string
	dirs []string
	lim  cgroupLimits
	// key is whose sandboxes may reuse it (Take); "" none.
	key string
	// base is what its event counters were when it was last released:
	// Reached counts from there.
	base counters
}

// New makes a sandbox cgroup with lim. Nothing is in it until Attach.
func (m *CgroupManager) New(lim cgroupLimits) (*Cgroup, error) {
	if lim.MemoryBytes <= 0 || lim.Pids <= 0 || lim.CPUs <= 0 {
		return nil, fmt.Errorf("sandbox cgroup: every limit must be set: %+v", lim)
	}
	cg := &Cgroup{m: m, name: "sb-" + randomHex(8), lim: lim}
	for _, b := range m.bases {
		d := filepath.Join(b, cg.name)
		if err := m.mkdir(d); err != nil {
			_ = cg.Remove()
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
		cg.dirs = append(cg.dirs, d)
	}
	for _, w := range m.limitWrites(lim) {
		p := filepath.Join(w.base, cg.name, w.file)
		if w.optional && !m.has[w.file] {
			continue
		}
		if err := cgroup.Write(p, w.value); err != nil {
			_ = cg.Remove()
			return nil, fmt.Errorf("set %s=%s: %w", p, w.value, err)
		}
	}
	return cg, nil
}

// limitWrite is one interface file write.
type limitWrite struct {
	base, file, value string
	optional          bool // skipped when the kernel has no such file
}

// limitWrites lists, in order, the files New writes for lim.
func (m *CgroupManager) limitWrites(lim cgroupLimits) []limitWrite {
	quota := max(int64(lim.CPUs*cpuPeriod+0.5), 1000) // the kernel's minimum is 1 ms
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	var ws []limitWrite
	for _, c := range m.ctrls {
		add := func(file, value string, optional bool) {
			ws = append(ws, limitWrite{base: c.base, file: file, value: value, optional: optional})
		}
		switch {
		case m.mode == CgroupV2 && c.name == "memory":
			add("memory.max", mem, false)
			add("memory.swap.max", "0", true) // absent without swap accounting
		case m.mode == CgroupV2 && c.name == "pids":
			add("pids.max", strconv.Itoa(lim.Pids), false)
		case m.mode == CgroupV2 && c.name == "cpu":
			add("cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriod), false)
		case m.mode == CgroupV2 && c.name == "io":
			add("io.bfq.weight", strconv.Itoa(cgroupIOWeight), true)
		case c.name == "memory":
			add("memory.limit_in_bytes", mem, false)
			// memsw (RAM + swap) exists with swap accounting; the same value
			// means no swap on top. Where it is missing, swappiness 0 keeps
			// the sandbox out of swap.
			add("memory.memsw.limit_in_bytes", mem, true)
			if !m.has["memory.memsw.limit_in_bytes"] {
				add("memory.swappiness", "0", true)
			}
		case c.name == "pids":
			add("pids.max", strconv.Itoa(lim.Pids), false)
		case c.name == "cpu":
			// A new cgroup's period is the kernel's default, cpuPeriod.
			add("cpu.cfs_quota_us", strconv.FormatInt(quota, 10), false)
		case c.name == "blkio":
			add("blkio.bfq.weight", strconv.Itoa(cgroupIOWeight), true)
		}
	}
	return ws
}

// Attach moves process pid (with its threads) into the cgroup; its children
// are born there.
func (c *Cgroup) Attach(pid int) error {
	for _, d := range c.dirs {
		if err := cgroup.Write(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// Dirs are the cgroup's directories, one per hierarchy (one on v2).
func (c *Cgroup) Dirs() []string { return c.dirs }

// Name is the cgroup's directory name.
func (c *Cgroup) Name() string { return c.name }

// Remove kills whatever is left in the cgroup and removes it.
func (c *Cgroup) Remove() error {
	var errs []error
	for _, d := range c.dirs {
		errs = append(errs, cgroup.Remove(d, c.m.rmdir))
	}
	return errors.Join(errs...)
}

// permError names the fix when the host may not write its cgroup.
func (m *CgroupManager) permError(what string, err error) error {
	e := &CgroupError{Reason: what, Err: err}
	if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EROFS) {
		e.Fix = fixRootV2
		if m.mode == CgroupV1 {
			e.Fix = fixRootV1
		}
	}
	return e
}

// bfqInUse reports whether any block device is scheduled by bfq, the only
// scheduler that honours cgroup I/O weights.
func bfqInUse() bool {
	files, _ := filepath.Glob("/sys/block/*/queue/scheduler")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "[bfq]") {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
