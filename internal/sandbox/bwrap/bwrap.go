// Package bwrap runs one agent invocation inside a bubblewrap sandbox with the
// view described in DESIGN.md ("Sandbox contract").
//
// Limits: wall time and output size are enforced by the host. Memory (all
// processes together, tmpfs, /dev/shm, memfd and SysV shared memory included,
// no swap on top), processes and CPU time are the limits of a cgroup the host
// makes for each sandbox (cgroup.go); bwrap is started inside it
// (Cgroup.Start), so every process of the sandbox is born there. No cgroup,
// no sandbox: New fails when none can be made. File size, open files and
// core dumps are rlimits set on bwrap's namespace init while it waits on
// --block-fd, before the command is forked (see release).
//
// bwrap runs as the init of a PID namespace of its own, so the sandbox ends
// with it: when the host dies, or kills it (see command).
package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// pipeWait bounds how long Check waits for bwrap's output to end once
// bwrap has exited (exec.Cmd.WaitDelay).
const pipeWait = 10 * time.Second

// Config configures the backend.
type Config struct {
	// BwrapPath is the bwrap binary; default: "bwrap" looked up in PATH.
	BwrapPath string
	// AgentBin is the host path of the static clawpen-agent binary. It is bound
	// read-only at AgentPath and run as the command.
	AgentBin string
	// RunAsUID and RunAsGID are the host user bwrap runs as; -1 means the host
	// process's own. A host running as root must name an unprivileged user,
	// otherwise sandbox uid 1000 would map to root: clawpen gives it the
	// dedicated sandbox user (app.SandboxUser).
	RunAsUID, RunAsGID int
	// Command, when non-empty, replaces the agent as the sandboxed command. For
	// tests and benchmarks only.
	Command []string
	// PinDir, for a root host, is where every bind source is pinned (package
	// pin) before bwrap, running as the unprivileged user, binds it: the
	// sources need not be reachable by that user (a project under /root), and
	// a path swapped for a symlink cannot redirect a bind. The directory and
	// its parents must be traversable by the run-as user; nothing else may
	// live there.
	PinDir string
	// CgroupName names this host's directory of sandbox cgroups under its
	// own cgroup (see cgroup.go). A host that keeps its name across
	// restarts removes what a crash left there; two live hosts must not share
	// it. Empty: a random name, removed by Close.
	CgroupName string
	// ReuseCgroups keeps a sandbox's cgroup, once the sandbox is gone and
	// the cgroup provably empty, for its group's next sandbox with the same
	// limits (CgroupManager.Take, Release); Close removes them. Off: each
	// sandbox's cgroup is removed with it.
	ReuseCgroups bool
	Logger       *slog.Logger
}

// Backend runs invocations under bubblewrap.
type Backend struct {
	cfg        Config
	bwrap      string
	uid, gid   int  // run-as user
	switchUser bool // the host is root: start bwrap with Credential{uid, gid}
	host       sandbox.HostSystem
	cgroups    *CgroupManager
	filter     []byte // the seccomp program, built once
	log        *slog.Logger
	afterOpen  func()    // test hook: runs after the bind sources are opened
	sawInit    func(int) // test hook: the host pid of the namespace init
	// test hook: runs before the limits are set; an error fails the release
	beforeRelease func() error

	// nobodyView shows groups/global to non-main groups as nobody's (see
	// globalPin); made on first use.
	nobodyOnce sync.Once
	nobodyView *sandbox.IDMap
	nobodyErr  error
	// keyringWarn logs once that the host may not create keyrings.
	keyringWarn sync.Once
	// baseline: no cgroup, no seccomp filter, no fresh keyring (NewBaseline).
	baseline bool
}

// New validates cfg: bwrap and the agent binary must exist, the run-as user
// must not be root, and the host must be able to make sandbox cgroups (the
// error then says what is missing and how to fix it). Close releases the
// cgroups.
func New(cfg Config) (*Backend, error) { return newBackend(cfg, false) }

func newBackend(cfg Config, baseline bool) (*Backend, error) {
	b := &Backend{cfg: cfg, log: cfg.Logger, baseline: baseline}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	name := cfg.BwrapPath
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("bubblewrap not found (%s): install it (apt-get install bubblewrap) or set the bwrap path: %w", name, err)
	}
	b.bwrap = p

	hostUID, hostGID := os.Getuid(), os.Getgid()
	switch {
	case hostUID == 0:
		if cfg.RunAsUID <= 0 || cfg.RunAsGID <= 0 {
			return nil, fmt.Errorf("the host runs as root, so bwrap must run as an unprivileged user " +
				"(sandbox uid 1000 would otherwise be host root): set the run-as uid and gid to the dedicated sandbox user")
		}
		b.uid, b.gid, b.switchUser = cfg.RunAsUID, cfg.RunAsGID, true
	default:
		if (cfg.RunAsUID != -1 && cfg.RunAsUID != hostUID) || (cfg.RunAsGID != -1 && cfg.RunAsGID != hostGID) {
			return nil, fmt.Errorf("cannot run bwrap as uid %d gid %d: the host runs as uid %d gid %d and can only use its own (set -1)",
				cfg.RunAsUID, cfg.RunAsGID, hostUID, hostGID)
		}
		b.uid, b.gid = hostUID, hostGID
	}

	if cfg.AgentBin == "" && len(cfg.Command) == 0 {
		return nil, errors.New("no agent binary configured (CLAWPEN_AGENT_BIN)")
	}
	if cfg.AgentBin != "" {
		if err := b.checkAgentBin(cfg.AgentBin); err != nil {
			return nil, err
		}
	}
	b.host = sandbox.ProbeHostSystem()
	if !baseline {
		cg, err := OpenCgroups(CgroupConfig{Name: cfg.CgroupName})
		if err != nil {
			return nil, fmt.Errorf("bwrap sandboxes cannot be limited, so none will run: %w", err)
		}
		b.cgroups = cg
		b.log.Debug("sandbox cgroups", "where", cg.Describe())
	}
	if b.filter, err = sandbox.SeccompProgram(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Backend) checkAgentBin(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("agent binary %s is not a regular file", p)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	// Inside the sandbox a file not owned by the run-as user shows up as
	// nobody's, so only its "other" bits count.
	executable := perm&0o001 != 0 || (st != nil && int(st.Uid) == b.uid && perm&0o100 != 0)
	if !executable {
		return fmt.Errorf("agent binary %s is not executable by the sandbox user uid %d (chmod a+rx)", p, b.uid)
	}
	return nil
}

// Name is the backend's name in configuration and logs.
func (b *Backend) Name() string { return "bwrap" }

// Cgroups describes where sandbox cgroups are made (for doctor and logs).
func (b *Backend) Cgroups() string { return b.cgroups.Describe() }

// CgroupMode is the cgroup version sandbox limits are held in (for /status).
func (b *Backend) CgroupMode() CgroupMode { return b.cgroups.Mode() }

// Close removes the host's sandbox cgroups (call it once no Run is left).
func (b *Backend) Close() error {
	if b.baseline {
		return nil
	}
	return b.cgroups.Close()
}

// newCgroup makes the cgroup for one sandbox with lim; key, when not ""
// and cgroups are reused, names whose sandboxes may reuse it
// (CgroupManager.Take).
func (b *Backend) newCgroup(key string, lim sandbox.Limits) (*Cgroup, error) {
	if !b.cfg.ReuseCgroups {
		key = ""
	}
	cg, err := b.cgroups.Take(key, cgroupLimits{MemoryBytes: lim.MemoryBytes, Pids: lim.Pids, CPUs: lim.CPUs})
	if err != nil {
		return nil, fmt.Errorf("make the sandbox's cgroup: %w", err)
	}
	return cg, nil
}

// Check runs a trivial sandbox with the same namespaces, user, cgroup, rlimits,
// seccomp filter and keyring as Run and reports why it fails, if it does: a
// filter the kernel refuses, or that is not in force in the sandbox, fails
// it (ErrSeccomp), so that no agent ever runs without it.
func (b *Backend) Check(ctx context.Context) error {
	if b.cfg.AgentBin != "" {
		if err := b.reachableUnlessPinned("agent binary", b.cfg.AgentBin); err != nil {
			return err
		}
	}
	args := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(sandbox.UID), "--gid", strconv.Itoa(sandbox.GID),
		"--clearenv", "--ro-bind", "/usr", "/usr",
	}
	for _, l := range b.host.RootLinks {
		args = append(args, "--symlink", l[0], l[1])
	}
	for _, d := range b.host.RootBinds {
		args = append(args, "--ro-bind", d, d)
	}
	// --info-fd names the namespace init, which waits on --block-fd until
	// its limits are set, as in Run. The command prints its own seccomp
	// mode with shell builtins only.
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--info-fd", "3", "--block-fd", "4", "--seccomp", "5", "--sync-fd", "6",
		"--", "/bin/sh", "-c", `while read -r k v; do case $k in Seccomp:) echo "$v";; esac; done </proc/self/status`)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := b.command(ctx, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	filter, err := dataPipe(b.filter)
	if err != nil {
		return fmt.Errorf("seccomp filter pipe: %w", err)
	}
	g, err := newGate()
	if err != nil {
		filter.Close()
		return err
	}
	defer g.close()
	cmd.ExtraFiles = []*os.File{g.infoW, g.blockR, filter, g.syncW}
	if err := markInheritedCloexec(); err != nil {
		filter.Close()
		return err
	}
	cg, err := b.newCgroup("", sandbox.DefaultLimits)
	if err != nil {
		filter.Close()
		return err
	}
	defer func() {
		if err := cg.Remove(); err != nil {
			b.log.Error("remove the check sandbox's cgroup", "err", err)
		}
	}()
	err = b.start(cmd, cg)
	filter.Close()
	g.started()
	if err == nil {
		var ns *nsProcess
		if ns, err = b.release(cmd, g); ns != nil {
			ns.close()
		}
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "seccomp") {
			return fmt.Errorf("%w: bubblewrap could not load it: %s (%v)", ErrSeccomp, msg, err)
		}
		return fmt.Errorf("bubblewrap cannot create a sandbox as uid %d: %s (%w); check that unprivileged user namespaces are enabled "+
			"(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, and on Ubuntu "+
			"kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)", b.uid, msg, err)
	}
	// 2 is SECCOMP_MODE_FILTER.
	if mode := strings.TrimSpace(stdout.String()); mode != "2" {
		return fmt.Errorf("%w: a trivial sandbox runs in seccomp mode %q, not 2 (filter)", ErrSeccomp, mode)
	}
	return nil
}

// ErrSeccomp is why Check fails when the sandbox's seccomp filter cannot be
// put in place.
var ErrSeccomp = errors.New("the seccomp filter is not in force")

// FilterSize is the seccomp program's length in BPF instructions.
func (b *Backend) FilterSize() int { return len(b.filter) / 8 }

// command builds "bwrap <args>" started as the run-as user in its own
// process group, as the init of a PID namespace of its own.
//
// That namespace is what makes a sandbox die with its host. The host's
// death kills bwrap (Pdeathsig, and bwrap's own --die-with-parent), but
// not bwrap's child, the sandbox's namespace init: the kernel clears a
// parent-death signal at fork, and bwrap sets the init's again only once
// the init has read --block-fd and forked the command (do_init), by then
// against a parent that may be gone, which never fires. An init orphaned
// while it waited for its limits ran its command outside any cgroup. Now
// bwrap's death is its namespace's end: the kernel kills every process in
// it, the nested sandbox namespace included, whatever state it is in.
// Killing bwrap is thus how a sandbox is stopped (killGroup), and nothing
// of it is left to reap once bwrap is.
func (b *Backend) command(ctx context.Context, bwrapArgs []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.bwrap, bwrapArgs...)
	cmd.Env = []string{} // bwrap gets --clearenv anyway
	// Go's check that the parent is still alive after setting Pdeathsig
	// sees no parent from inside the new namespace (getppid is 0) and
	// signals the child, which as a namespace init ignores its own
	// signal; the parent-death signal stays set.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	if b.switchUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}
	} else {
		// A host without CAP_SYS_ADMIN makes the PID namespace inside a
		// user namespace mapping only its own ids, in which bwrap is as
		// unprivileged as before.
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: b.uid, HostID: b.uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: b.gid, HostID: b.gid, Size: 1}}
	}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = pipeWait
	return cmd
}

// killGroup SIGKILLs bwrap's whole process group. bwrap's death ends its
// PID namespace, and with it everything in the sandbox (see command).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Run starts the sandbox for spec, feeds it spec.Stdin, copies its stdout to
// spec.Stdout (capped), and returns once every process of the sandbox is gone.
// An error means the sandbox could not be set up (nothing ran unsandboxed) or ctx
// was cancelled (the sandbox is then killed like on timeout, TimedOut is set and
// the error wraps ctx.Err()); the agent's own failure is a non-zero
// Result.ExitCode, 128+signal when it was killed.
func (b *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return b.run(ctx, spec, spec.Command)
}

func (b *Backend) run(ctx context.Context, spec sandbox.Spec, command []string) (sandbox.Result, error) {
	lim := spec.Limits.WithDefaults()
	// The cgroup is made while the bind sources are opened; bwrap starts
	// inside it.
	cgReady := make(chan struct{})
	var (
		cg    *Cgroup
		cgErr error
	)
	go func() {
		defer close(cgReady)
		if !b.baseline {
			cg, cgErr = b.newCgroup(spec.Group, lim)
		}
	}()
	// Deferred first, so it runs last, once bwrap and so the whole sandbox
	// are gone; the group's next sandbox reuses the cgroup when it is
	// empty, else it kills anything still in it and removes it.
	defer func() {
		<-cgReady
		if cg == nil {
			return
		}
		if err := cg.Release(); err != nil {
			b.log.Error("remove the sandbox's cgroup", "invocation", spec.InvocationID, "err", err)
		}
	}()
	fail := func(err error) (sandbox.Result, error) {
		return sandbox.Result{}, fmt.Errorf("bwrap sandbox for %s: %w", spec.Group, err)
	}
	p, err := b.prepare(spec, command)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	// Killed by Supervise, not by a context.
	cmd := b.command(context.Background(), p.args)
	cmd.ExtraFiles = p.files
	// bwrap's --new-session makes the command's session leader without a
	// controlling terminal: a pty is its stdio only, and the seccomp filter
	// refuses TIOCSTI on it anyway.
	st, started, resize, err := sandbox.CmdStreams(cmd, spec.Stdio)
	if err != nil {
		return fail(err)
	}
	if err := markInheritedCloexec(); err != nil {
		st.Close()
		return fail(err)
	}
	<-cgReady
	if cgErr != nil {
		st.Close()
		return fail(cgErr)
	}
	log := b.log.With("invocation", spec.InvocationID, "group", spec.Group)
	if cg != nil {
		log = log.With("cgroup", cg.Name())
	}
	return sandbox.Supervise(ctx, spec, &proc{b: b, cmd: cmd, p: p, cg: cg, started: started, resize: resize, log: log, group: spec.Group}, st, log)
}

// proc is one bwrap sandbox as sandbox.Supervise drives it.
type proc struct {
	b        *Backend
	cmd      *exec.Cmd
	p        *prepared
	cg       *Cgroup
	started  func() // drops the host's copies of bwrap's streams
	resize   func(sandbox.WinSize)
	log      *slog.Logger
	group    string
	ns       *nsProcess // bwrap's namespace init, once found
	readyErr error
}

func (r *proc) Start() error {
	if err := r.b.start(r.cmd, r.cg); err != nil {
		return fmt.Errorf("start bwrap: %w", err)
	}
	// The child has its copies; drop ours so EOF and the info pipe work.
	for _, f := range r.p.files {
		_ = f.Close()
	}
	r.p.files = nil
	r.p.gate.started()
	r.started()
	return nil
}

// Ready sets the limits bwrap's namespace init waits for (see release).
func (r *proc) Ready() error {
	r.ns, r.readyErr = r.b.release(r.cmd, r.p.gate)
	if r.readyErr != nil {
		return fmt.Errorf("bwrap sandbox for %s: %w", r.group, r.readyErr)
	}
	return nil
}

func (r *proc) Kill() { _ = killGroup(r.cmd) }

// Wait returns once bwrap is reaped, which is once its PID namespace is
// empty: every process of the sandbox is gone (see command).
func (r *proc) Wait(ended func()) (int, error) {
	code, err := sandbox.WaitCmd(r.cmd, ended)
	if r.ns != nil {
		if r.b.sawInit != nil {
			r.b.sawInit(r.ns.pid)
		}
		r.ns.close()
	}
	return code, err
}

func (r *proc) Resize(sz sandbox.WinSize) { r.resize(sz) }

func (r *proc) Finish(res *sandbox.Result) error {
	if r.cg != nil {
		var err error
		if res.Limit, err = r.cg.Reached(); err != nil {
			r.log.Warn("read the sandbox's cgroup counters", "err", err)
		}
	}
	// An init that died building the view (and so before its limits), or
	// bwrap's exit 1, leaves bwrap's own reason.
	msg, ok := bwrapFailure(res.Stderr)
	switch {
	case !ok:
	case r.readyErr != nil:
		return fmt.Errorf("bubblewrap could not build the sandbox: %s (%w)", msg, r.readyErr)
	case !res.TimedOut && !res.OutputTruncated && res.ExitCode == 1:
		return fmt.Errorf("bubblewrap could not build the sandbox: %s", msg)
	}
	return nil
}

// bwrapFailure finds bwrap's own error message ("bwrap: ...") in stderr: bwrap
// exits 1 when it cannot set the sandbox up, before the command runs.
func bwrapFailure(stderr string) (string, bool) {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "bwrap: ") {
			return strings.TrimPrefix(line, "bwrap: "), true
		}
	}
	return "", false
}

// nsProcess is bwrap's PID-namespace init, held by a pidfd so that a recycled
// pid can never be signalled.
type nsProcess struct {
	pid   int
	pidfd int
}

// watchInit waits for bwrap's --info-fd report and opens a pidfd on the
// namespace init it made: bwrap's only child, as the host sees it (bwrap
// reports pids, and namespaces read through them, of its own PID
// namespace; see command). nil when bwrap never got that far or the init
// is already gone. bwrap is not reaped meanwhile, so a process that is its
// child after the pidfd is opened is the init.
func watchInit(info *os.File, bwrap int) *nsProcess {
	var rep struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&rep); err != nil || rep.ChildPID <= 0 {
		return nil
	}
	children := func() []string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrap, bwrap))
		return strings.Fields(string(b))
	}
	c := children()
	if len(c) != 1 {
		return nil
	}
	pid, err := strconv.Atoi(c[0])
	if err != nil {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	if c := children(); len(c) != 1 || c[0] != strconv.Itoa(pid) {
		_ = unix.Close(fd)
		return nil
	}
	return &nsProcess{pid: pid, pidfd: fd}
}

func (n *nsProcess) close() { _ = unix.Close(n.pidfd) }

// pinning reports whether bind sources are pinned before each run.
func (b *Backend) pinning() bool { return b.switchUser && b.cfg.PinDir != "" }

func (b *Backend) reachableUnlessPinned(what, hostPath string) error {
	if b.pinning() {
		return nil
	}
	return b.reachable(what, hostPath)
}

// RawCommand is bwrap with exactly Run's command line and descriptors for
// spec, without Run's work around it (PID namespace, cgroup, limits, output
// cap): the baseline clawpen-bench compares Run against. The namespace init
// does not wait for limits (its release is written at once). The caller
// runs the command, reaps the namespace init bwrap leaves behind, then
// calls done.
func (b *Backend) RawCommand(spec sandbox.Spec, command ...string) (cmd *exec.Cmd, done func(), err error) {
	p, err := b.prepare(spec, command)
	if err != nil {
		return nil, nil, err
	}
	if _, err := p.gate.block.Write([]byte{1}); err != nil {
		p.close()
		return nil, nil, fmt.Errorf("release the sandbox: %w", err)
	}
	cmd = exec.Command(b.bwrap, p.args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = p.files
	if b.switchUser {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}}
	}
	return cmd, p.close, nil
}

// Fingerprint names the agent binary and bwrap as they are on disk now: a
// rebuilt binary makes sandboxes started before it stale.
func (b *Backend) Fingerprint(context.Context) (string, error) {
	return sandbox.FileFingerprint(b.cfg.AgentBin, b.bwrap)
}
