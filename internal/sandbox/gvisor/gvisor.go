// Package gvisor runs one agent invocation under gVisor's runsc, a kernel of
// its own (DESIGN.md, "gVisor backend"): the agent's syscalls are served by
// gVisor's Sentry, not the host kernel. The view is bwrap's (bundle.go).
//
// Limits: wall time and output size are the host's, as on the other
// backends. Memory, processes and CPU are the spec's linux.resources, which
// runsc writes to the container's cgroup (never --ignore-cgroups); the
// whole sandbox (Sentry and the agent's memory) is in it. File size, open
// files and core dumps are the spec's rlimits.
//
// runsc needs root: the host runs it as root, and the sandbox's uid 1000
// writes as the sandbox user through idmapped pins (as Docker does).
package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// runscTimeout bounds one runsc housekeeping call (delete, list).
const runscTimeout = 20 * time.Second

// Config configures the backend.
type Config struct {
	// RunscPath is the runsc binary; default "runsc" in PATH.
	RunscPath string
	// AgentBin is the host path of the static clawpen-agent, bound
	// read-only at AgentPath.
	AgentBin string
	// Command replaces the agent (tests and benchmarks only).
	Command []string
	// StateDir holds runsc's state (--root) and the bundles; made 0700.
	// Every container in it belongs to this host: New removes them.
	StateDir string
	// PinDir is where each invocation's bind sources are pinned.
	PinDir string
	// DiskUID and DiskGID are the sandbox user: what uid 1000 writes lands
	// on disk as them (idmapped pins).
	DiskUID, DiskGID int
	// Prefix names this host's cgroup directory; default "clawpen-gvisor".
	Prefix string
	Logger *slog.Logger
}

// Backend runs invocations under runsc.
type Backend struct {
	cfg     Config
	runsc   string
	state   string // runsc --root
	bundles string
	host    sandbox.HostSystem
	idmap   *sandbox.IDMap
	nobody  *sandbox.IDMap
	log     *slog.Logger
}

// New checks cfg, makes the state dir and removes every container a
// previous host left in it. Close releases the idmaps.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("gvisor: runsc needs the host to run as root")
	}
	if cfg.StateDir == "" || cfg.PinDir == "" {
		return nil, errors.New("gvisor: StateDir and PinDir are required")
	}
	if cfg.DiskUID <= 0 || cfg.DiskGID <= 0 {
		return nil, errors.New("gvisor: the sandbox user (DiskUID, DiskGID) must be set and not root")
	}
	if cfg.AgentBin == "" && len(cfg.Command) == 0 {
		return nil, errors.New("gvisor: no agent binary configured (CLAWPEN_AGENT_BIN)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "clawpen-gvisor"
	}
	name := cfg.RunscPath
	if name == "" {
		name = "runsc"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("runsc not found (%s): install it (apt-get install runsc): %w", name, err)
	}
	g := &Backend{cfg: cfg, runsc: p, state: filepath.Join(cfg.StateDir, "state"), bundles: filepath.Join(cfg.StateDir, "bundles"),
		host: sandbox.ProbeHostSystem(), log: cfg.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{cfg.StateDir, g.state, g.bundles} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("gvisor state dir: %w", err)
		}
		// Whoever reaches the state dir can exec into any sandbox.
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("gvisor state dir: %w", err)
		}
	}
	if err := sandbox.CleanPins(cfg.PinDir); err != nil {
		return nil, err
	}
	if g.idmap, err = sandbox.NewIDMapKeepRoot(cfg.DiskUID, cfg.DiskGID, sandbox.UID, sandbox.GID); err != nil {
		return nil, err
	}
	if g.nobody, err = sandbox.NewIDMap(cfg.DiskUID, cfg.DiskGID, sandbox.Nobody, sandbox.Nobody); err != nil {
		_ = g.idmap.Close()
		return nil, err
	}
	if _, err := g.RemoveOrphans(ctx); err != nil {
		_ = g.Close()
		return nil, err
	}
	return g, nil
}

// Name is the backend's name in configuration and logs.
func (g *Backend) Name() string { return "gvisor" }

// Close releases the idmaps and this host's cgroup directories (empty once
// no Run is left).
func (g *Backend) Close() error {
	for _, c := range controllers {
		dir := filepath.Join("/sys/fs/cgroup", c, g.cfg.Prefix)
		// A run cut short (the host stopped mid-start) may leave its empty
		// cgroup; rmdir refuses one that still has a process.
		left, _ := os.ReadDir(dir)
		for _, e := range left {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		_ = os.Remove(dir)
	}
	_ = g.idmap.Close()
	_ = g.nobody.Close()
	return nil
}

// Version is runsc's version line.
func (g *Backend) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, g.runsc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("runsc --version: %w", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// Check runs a trivial sandbox the way Run does, in a scratch folder.
func (g *Backend) Check(ctx context.Context) error {
	dir, err := os.MkdirTemp(g.cfg.StateDir, "check-")
	if err != nil {
		return fmt.Errorf("gvisor check: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chown(dir, g.cfg.DiskUID, g.cfg.DiskGID); err != nil {
		return fmt.Errorf("gvisor check: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := g.run(ctx, sandbox.Spec{InvocationID: "check", Group: "check", GroupDir: dir, Stdout: &out},
		[]string{"/bin/sh", "-c", "echo ok > /workspace/group/ok && cat /workspace/group/ok"})
	if err != nil {
		return fmt.Errorf("runsc cannot run a sandbox: %w", err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(out.String()) != "ok" {
		return fmt.Errorf("runsc cannot run a sandbox: exit %d, output %q, stderr %q", res.ExitCode, out.String(), lastLines(res.Stderr))
	}
	return nil
}

var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,100}$`)

// global are runsc's flags for every command.
func (g *Backend) global() []string {
	return []string{"--root", g.state, "--network=none", "--host-uds=open", "--oci-seccomp"}
}

// RemoveOrphans kills and deletes every container in the state dir, and
// every bundle: after a crash of the host they are sandboxes nobody waits
// for.
func (g *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, runscTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, g.runsc, append(g.global(), "list", "--quiet")...).Output()
	if err != nil {
		return 0, fmt.Errorf("runsc list: %w", err)
	}
	n := 0
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		id := strings.TrimSpace(sc.Text())
		if !validID.MatchString(id) {
			continue
		}
		g.killCgroup(id)
		if err := g.delete(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		g.log.Info("removed orphaned gVisor sandbox", "container", id)
		n++
	}
	entries, _ := os.ReadDir(g.bundles)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(g.bundles, e.Name()))
		g.removeCgroup(e.Name())
	}
	return n, errors.Join(errs...)
}

// delete removes the container and what runsc holds for it.
func (g *Backend) delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, runscTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, g.runsc, append(g.global(), "delete", "--force", id)...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runsc delete %s: %s (%w)", id, strings.TrimSpace(string(out)), err)
	}
	return nil
}

// v1 controllers runsc makes the container's cgroup in.
var controllers = []string{"pids", "memory", "cpu", "cpuacct", "cpuset", "blkio", "devices", "freezer", "net_cls", "net_prio", "perf_event", "hugetlb", "systemd"}

// killCgroup SIGKILLs every process in the container's cgroup: the
// sandbox (Sentry). runsc kill and delete wait on the container's lock,
// which a stuck sandbox may hold; a signal does not.
func (g *Backend) killCgroup(id string) {
	for _, c := range []string{"pids", "memory"} {
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", c, g.cfg.Prefix, id, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// removeCgroup removes the container's cgroup once its killed processes
// are gone (rmdir fails while one is still exiting; bounded).
func (g *Backend) removeCgroup(id string) {
	for range 50 {
		busy := false
		for _, c := range controllers {
			err := os.Remove(filepath.Join("/sys/fs/cgroup", c, g.cfg.Prefix, id))
			busy = busy || errors.Is(err, syscall.EBUSY)
		}
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run starts the sandbox for spec, feeds it the job, copies its stdout to
// spec.Stdout (capped) and returns once the sandbox is gone and deleted.
func (g *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return g.run(ctx, spec, spec.Command)
}

func (g *Backend) run(ctx context.Context, spec sandbox.Spec, command []string) (sandbox.Result, error) {
	var res sandbox.Result
	if err := spec.Validate(); err != nil {
		return res, err
	}
	id := g.cfg.Prefix + "-" + spec.InvocationID
	if !validID.MatchString(id) {
		return res, fmt.Errorf("gvisor: invalid invocation id %q", spec.InvocationID)
	}
	bd, err := g.writeBundle(spec, id, command)
	if err != nil {
		return res, fmt.Errorf("gvisor sandbox for %s: %w", spec.Group, err)
	}
	defer func() {
		// Every process of the sandbox is gone before its pins go.
		g.killCgroup(id)
		if err := g.delete(context.WithoutCancel(ctx), id); err != nil {
			g.log.Error("delete the gVisor sandbox", "invocation", spec.InvocationID, "err", err)
		}
		g.removeCgroup(id)
		bd.remove()
	}()

	cmd := exec.Command(g.runsc, append(g.global(), "run", "--bundle", bd.dir, id)...)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	st, started, resize, err := sandbox.CmdStreams(cmd, spec.Stdio)
	if err != nil {
		return res, err
	}
	log := g.log.With("invocation", spec.InvocationID, "group", spec.Group, "container", id)
	return sandbox.Supervise(ctx, spec, &proc{g: g, id: id, cmd: cmd, started: started, resize: resize}, st, log)
}

// proc is one runsc sandbox as sandbox.Supervise drives it.
type proc struct {
	g       *Backend
	id      string
	cmd     *exec.Cmd
	started func()
	resize  func(sandbox.WinSize)
}

func (p *proc) Start() error {
	err := p.cmd.Start()
	p.started()
	if err != nil {
		return fmt.Errorf("start runsc: %w", err)
	}
	return nil
}

func (p *proc) Ready() error { return nil }

func (p *proc) Kill() {
	p.g.killCgroup(p.id)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Wait returns once runsc has exited; what may be left of the sandbox in
// its cgroup is killed, and waited for, before Run returns (see run).
func (p *proc) Wait(ended func()) (int, error) { return sandbox.WaitCmd(p.cmd, ended) }

// Resize resizes the host-made terminal runsc's process has as its stdio.
func (p *proc) Resize(sz sandbox.WinSize) { p.resize(sz) }

func (p *proc) Finish(res *sandbox.Result) error {
	res.Limit = p.g.reached(p.id)
	// runsc's own failure (a bundle it refuses) is exit 128 with its
	// message on stderr, before the command ran.
	if !res.TimedOut && !res.OutputTruncated && res.ExitCode == 128 && strings.Contains(res.Stderr, "running container") {
		return fmt.Errorf("runsc could not build the sandbox: %s", lastLines(res.Stderr))
	}
	return nil
}

// reached reads the container's v1 cgroup counters: the OOM killer's
// kills and refused forks. Read before the cgroup is removed.
func (g *Backend) reached(id string) sandbox.Limit {
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", g.cfg.Prefix, id, "memory.oom_control")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
				return sandbox.MemoryLimit
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids", g.cfg.Prefix, id, "pids.events")); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "max" && f[1] != "0" {
			return sandbox.ProcessLimit
		}
	}
	return ""
}

func lastLines(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = s[len(s)-400:]
	}
	return s
}

// Fingerprint names the agent binary and runsc as they are on disk now: a
// rebuilt binary makes sandboxes started before it stale.
func (g *Backend) Fingerprint(context.Context) (string, error) {
	return sandbox.FileFingerprint(g.cfg.AgentBin, g.runsc)
}
