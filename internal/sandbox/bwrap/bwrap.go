// Package bwrap runs one agent invocation inside a bubblewrap sandbox with the
// view described in DESIGN.md ("Sandbox contract").
//
// Limits: wall time and output size are enforced by the host; memory (RLIMIT_AS),
// process count (RLIMIT_NPROC), file size, open files and core dumps are rlimits
// the host sets with prlimit(2) on bwrap's namespace init while it waits on
// --block-fd, before the command is forked (see release), because cgroups are
// not available to an unprivileged user on every host. RLIMIT_NPROC is counted per user
// namespace (Linux ≥ 5.14), but the limit is also applied to the run-as user's
// total across its sandboxes, so concurrent sandboxes of the same user share it:
// run bwrap as a dedicated user. RLIMIT_AS is per process and counts address
// space, not resident memory; a Go program reserves about 800 MiB at start, so
// keep MemoryBytes at 1 GiB or more for the Go agent.
//
// When the agent exits, bwrap leaves its PID-namespace init for the host's PID 1
// to reap; until then the zombie counts against the run-as user's process
// limit. The host therefore needs a reaping init (systemd, or docker run --init).
package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// Defaults for rlimits that sandbox.Limits does not carry.
const (
	DefaultFileSizeBytes = 1 << 30
	DefaultOpenFiles     = 1024
	stderrTail           = 8 << 10
	// reapWait bounds how long Run waits for the PID namespace to empty after
	// bwrap itself is gone; the kernel tears it down right away in practice.
	reapWait = 10 * time.Second
)

// Config configures the backend.
type Config struct {
	// BwrapPath is the bwrap binary; default: "bwrap" looked up in PATH.
	BwrapPath string
	// AgentBin is the host path of the static clawpen-agent binary. It is bound
	// read-only at AgentPath and run as the command.
	AgentBin string
	// RunAsUID and RunAsGID are the host user bwrap runs as; -1 means the host
	// process's own. A host running as root must name an unprivileged user,
	// otherwise sandbox uid 1000 would map to root.
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
	// FileSizeBytes (RLIMIT_FSIZE) and OpenFiles (RLIMIT_NOFILE); 0 = defaults.
	FileSizeBytes int64
	OpenFiles     int
	Logger        *slog.Logger
}

// Backend runs invocations under bubblewrap.
type Backend struct {
	cfg        Config
	bwrap      string
	uid, gid   int  // run-as user
	switchUser bool // the host is root: start bwrap with Credential{uid, gid}
	host       hostLayout
	log        *slog.Logger
	afterOpen  func()    // test hook: runs after the bind sources are opened
	sawInit    func(int) // test hook: the host pid of the namespace init
	// test hook: runs before the limits are set; an error fails the release
	beforeRelease func() error
}

// New validates cfg: bwrap and the agent binary must exist, and the
// run-as user must not be root.
func New(cfg Config) (*Backend, error) {
	b := &Backend{cfg: cfg, log: cfg.Logger}
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
				"(sandbox uid 1000 would otherwise be host root): set the run-as uid and gid to the owner of groups/")
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
	b.host = probeHost()
	// bwrap exits without reaping its PID-namespace init, which is then
	// reparented. As a child subreaper the host gets it and reaps it at once
	// (nsProcess.reap); otherwise it waits for the host's PID 1, which may be
	// slow or absent, while every zombie counts against the run-as user's
	// process limit.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.log.Warn("cannot become child subreaper; sandbox zombies wait for PID 1", "err", err)
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

// Check runs a trivial sandbox with the same namespaces, user and rlimits as Run
// and reports why it fails, if it does.
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
	for _, l := range b.host.rootLinks {
		args = append(args, "--symlink", l[0], l[1])
	}
	for _, d := range b.host.rootBinds {
		args = append(args, "--ro-bind", d, d)
	}
	// --info-fd names the namespace init, which bwrap leaves to us to reap
	// and which waits on --block-fd until its limits are set, as in Run.
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--info-fd", "3", "--block-fd", "4", "--", "/usr/bin/true")

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := b.command(ctx, args)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("info pipe: %w", err)
	}
	defer infoR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return fmt.Errorf("block pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{infoW, blockR}
	if err := markInheritedCloexec(); err != nil {
		infoW.Close()
		blockR.Close()
		blockW.Close()
		return err
	}
	if n, err := countUserProcesses(b.uid); err == nil && n > sandbox.DefaultLimits.Pids/2 {
		b.log.Warn("the sandbox user already runs many processes; RLIMIT_NPROC counts them too, so sandboxes may fail to fork: use a dedicated user",
			"uid", b.uid, "processes", n, "pids_limit", sandbox.DefaultLimits.Pids)
	}
	err = cmd.Start()
	infoW.Close()
	blockR.Close()
	if err == nil {
		ns := watchInit(infoR)
		if ns != nil {
			if rerr := b.release(ns, sandbox.DefaultLimits, blockW); rerr != nil {
				_ = unix.PidfdSendSignal(ns.pidfd, unix.SIGKILL, nil, 0)
				err = rerr
			}
		}
		blockW.Close()
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
		if ns != nil {
			if ns.killAndWait(reapWait) {
				ns.reap()
			}
			ns.close()
		}
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		return fmt.Errorf("bubblewrap cannot create a sandbox as uid %d: %s (%w); check that unprivileged user namespaces are enabled "+
			"(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, and on Ubuntu "+
			"kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)", b.uid, msg, err)
	}
	return nil
}

// command builds "bwrap <args>" started as the run-as user in its own
// process group.
func (b *Backend) command(ctx context.Context, bwrapArgs []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.bwrap, bwrapArgs...)
	cmd.Env = []string{} // bwrap gets --clearenv anyway
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if b.switchUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}
	}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = reapWait
	return cmd
}

// killer stops a running sandbox. It prefers killing bwrap's PID-namespace init:
// bwrap then reaps it and exits by itself. Killing bwrap first would orphan the
// init to the host's PID 1, and a PID 1 that reaps slowly (or never, in a
// container without an init) leaves zombies that count against the run-as
// user's process limit.
type killer struct {
	cmd *exec.Cmd
	ns  atomic.Pointer[nsProcess]
}

func (k *killer) kill() error {
	if ns := k.ns.Load(); ns != nil {
		err := unix.PidfdSendSignal(ns.pidfd, unix.SIGKILL, nil, 0)
		if err == nil || errors.Is(err, unix.ESRCH) {
			return nil
		}
	}
	// No namespace yet (bwrap is still setting up): kill bwrap's process group.
	return killGroup(k.cmd)
}

// killGroup SIGKILLs bwrap's whole process group; bwrap's PID-namespace init is
// in it, and its death makes the kernel kill everything in the namespace.
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
	return b.run(ctx, spec, nil)
}

func (b *Backend) run(ctx context.Context, spec sandbox.Spec, command []string) (sandbox.Result, error) {
	var res sandbox.Result
	lim := spec.Limits.WithDefaults()
	p, err := b.prepare(spec, command)
	if err != nil {
		return res, fmt.Errorf("bwrap sandbox for %s: %w", spec.Group, err)
	}
	defer p.close()

	runCtx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cmd := b.command(runCtx, p.args)
	k := &killer{cmd: cmd}
	cmd.Cancel = k.kill
	cmd.ExtraFiles = p.files
	// The job is written only once the limits are set: should the host die
	// before, the sandbox reads no job and does nothing.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, fmt.Errorf("stdout pipe: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return res, fmt.Errorf("stderr pipe: %w", err)
	}

	if err := markInheritedCloexec(); err != nil {
		return res, fmt.Errorf("bwrap sandbox for %s: %w", spec.Group, err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start bwrap: %w", err)
	}
	// The child has its copies; drop ours so EOF and the info pipe work.
	for _, f := range p.files {
		_ = f.Close()
	}
	p.files = nil
	log := b.log.With("invocation", spec.InvocationID, "group", spec.Group, "pid", cmd.Process.Pid)
	log.Debug("sandbox started")

	// OnLimit runs in a goroutine; limitKilled lets the kill finish before bwrap
	// is reaped and the pidfd closed, so it cannot hit a reused pid or fd.
	limitKilled := make(chan struct{})
	out := &sandbox.CapWriter{W: spec.Stdout, Limit: lim.OutputBytes, OnLimit: func() {
		defer close(limitKilled)
		log.Warn("sandbox output limit reached; killing", "limit", lim.OutputBytes)
		_ = k.kill()
	}}
	tail := &sandbox.Tail{Max: stderrTail}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(out, stdout) }()
	go func() { defer wg.Done(); _, _ = io.Copy(tail, stderr) }()

	// bwrap reports the namespace init right after cloning it (or exits,
	// closing the pipe, when it fails before).
	ns := watchInit(p.info)
	k.ns.Store(ns)
	var setupErr error
	switch {
	case ns == nil:
	case runCtx.Err() != nil:
		// A kill requested before the namespace existed went to the process
		// group; make sure it reaches the namespace too.
		_ = k.kill()
	default:
		if err := b.release(ns, lim, p.block); err != nil {
			setupErr = err
			_ = k.kill()
		} else {
			go func() {
				_, _ = stdin.Write(spec.Stdin)
				_ = stdin.Close()
			}()
		}
	}
	wg.Wait()
	// Truncated is set by the same Write that started OnLimit, and that Write
	// has returned by now.
	if out.Truncated() {
		<-limitKilled
	}
	waitErr := cmd.Wait()
	res.Duration = time.Since(start)

	// bwrap is reaped; make sure its PID namespace is empty before returning.
	if ns != nil {
		if b.sawInit != nil {
			b.sawInit(ns.pid)
		}
		if !ns.killAndWait(reapWait) {
			log.Error("sandbox PID namespace did not exit in time", "init_pid", ns.pid)
		} else {
			ns.reap()
		}
		ns.close()
	}

	res.Stderr = tail.String()
	res.OutputTruncated = out.Truncated()
	res.ExitCode = exitCode(cmd.ProcessState)
	if runCtx.Err() != nil {
		res.TimedOut = true
	}
	log.Debug("sandbox finished", "exit", res.ExitCode, "timed_out", res.TimedOut,
		"truncated", res.OutputTruncated, "duration", res.Duration)

	if ctx.Err() != nil {
		return res, fmt.Errorf("sandbox run cancelled: %w", ctx.Err())
	}
	if setupErr != nil {
		return res, fmt.Errorf("bwrap sandbox for %s: %w", spec.Group, setupErr)
	}
	if waitErr != nil && cmd.ProcessState == nil {
		return res, fmt.Errorf("wait for bwrap: %w", waitErr)
	}
	if !res.TimedOut && !res.OutputTruncated && res.ExitCode == 1 {
		if msg, ok := bwrapFailure(res.Stderr); ok {
			return res, fmt.Errorf("bubblewrap could not build the sandbox: %s", msg)
		}
	}
	return res, nil
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

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// nsProcess is bwrap's PID-namespace init, held by a pidfd so that a recycled
// pid can never be signalled.
type nsProcess struct {
	pid   int
	pidfd int
}

// watchInit reads bwrap's --info-fd report and opens a pidfd on the namespace
// init, verifying it is still in the reported PID namespace. nil when bwrap
// never got that far or the init is already gone.
func watchInit(info *os.File) *nsProcess {
	var rep struct {
		ChildPID int    `json:"child-pid"`
		PIDNS    uint64 `json:"pid-namespace"`
	}
	if err := json.NewDecoder(info).Decode(&rep); err != nil || rep.ChildPID <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(rep.ChildPID, 0)
	if err != nil {
		return nil
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(rep.ChildPID) + "/ns/pid")
	if err != nil || link != "pid:["+strconv.FormatUint(rep.PIDNS, 10)+"]" {
		_ = unix.Close(fd)
		return nil
	}
	return &nsProcess{pid: rep.ChildPID, pidfd: fd}
}

// killAndWait kills the namespace init and waits until it has exited, which
// happens only once every process in its namespace is gone.
func (n *nsProcess) killAndWait(max time.Duration) bool {
	_ = unix.PidfdSendSignal(n.pidfd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(n.pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(max)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		nready, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == nil && nready > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
	}
}

func (n *nsProcess) close() { _ = unix.Close(n.pidfd) }

// reap collects the exited init when it was reparented to this process (the
// host is a child subreaper). If it is not our child, waitid fails at once
// with ECHILD and someone else reaps it.
func (n *nsProcess) reap() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PIDFD, n.pidfd, &info, unix.WEXITED, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// countUserProcesses counts the host processes (zombies included) whose real
// uid is uid.
func countUserProcesses(uid int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		// /proc/<pid> is owned by the process's effective uid; close enough.
		if err := syscall.Stat("/proc/"+e.Name(), &st); err == nil && int(st.Uid) == uid {
			n++
		}
	}
	return n, nil
}

// pinning reports whether bind sources are pinned before each run.
func (b *Backend) pinning() bool { return b.switchUser && b.cfg.PinDir != "" }

func (b *Backend) reachableUnlessPinned(what, hostPath string) error {
	if b.pinning() {
		return nil
	}
	return b.reachable(what, hostPath)
}

// RawCommand is bwrap with exactly Run's command line and descriptors for
// spec, without Run's work around it (limits, output cap, namespace reaping):
// the baseline `clawpen bench` compares Run against. The namespace init does
// not wait for limits (its --block-fd is closed at once). The caller runs the
// command, reaps the namespace init bwrap leaves behind, then calls done.
func (b *Backend) RawCommand(spec sandbox.Spec, command ...string) (cmd *exec.Cmd, done func(), err error) {
	p, err := b.prepare(spec, command)
	if err != nil {
		return nil, nil, err
	}
	_ = p.block.Close()
	p.block = nil
	cmd = exec.Command(b.bwrap, p.args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = p.files
	if b.switchUser {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), Groups: []uint32{}}}
	}
	return cmd, p.close, nil
}
