// Package app assembles the host for `clawpen serve` (NewHost: the
// operations service, runner, router and scheduler, in dependency order, on
// a store, a Telegram client and a sandbox backend), picks the backend, and
// runs the checks of `clawpen doctor` through the same functions.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/clawpen/clawpen/internal/approval"
	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"

	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/retry"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
	"github.com/clawpen/clawpen/internal/sandbox/gvisor"
	"github.com/clawpen/clawpen/internal/scheduler"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
	"github.com/clawpen/clawpen/internal/tools"
)

const offsetKey = "telegram_offset"

// DBPath is the database file under the data dir.
func DBPath(dataDir string) string { return filepath.Join(dataDir, "clawpen.db") }

// OpenStore prepares the data dir and opens the database: PostgreSQL at
// CLAWPEN_DATABASE_URL when it is set, else SQLite in the data dir.
func OpenStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	var (
		st  *store.Store
		err error
	)
	if cfg.DatabaseURL != "" {
		st, err = store.OpenPostgres(ctx, cfg.DatabaseURL)
	} else {
		st, err = store.Open(ctx, DBPath(cfg.DataDir))
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// MountPolicy is the mount allowlist as this configuration reads it.
func MountPolicy(cfg config.Config, log *slog.Logger) *mounts.Policy {
	return mounts.NewPolicy(mounts.PolicyConfig{Allowlist: cfg.MountAllowlist, DataDir: cfg.DataDir, GroupsDir: cfg.GroupsDir,
		Root: cfg.Root, HostRoot: cfg.HostRoot}, log)
}

// PinDir is where a root host pins bind sources for bwrap: on /run (a
// tmpfs every user can traverse), one directory per data dir.
func PinDir(cfg config.Config) string {
	sum := sha256.Sum256([]byte(cfg.DataDir))
	return filepath.Join("/run/clawpen", hex.EncodeToString(sum[:6]))
}

// CgroupName is this host's directory of sandbox cgroups under its own
// cgroup: one per data dir, so a restart removes what a crash left.
func CgroupName(cfg config.Config) string {
	sum := sha256.Sum256([]byte(cfg.DataDir))
	return "clawpen-" + hex.EncodeToString(sum[:6])
}

// instance names what a host makes outside its data dir, so that two never
// touch each other's: serve's names derive from the data dir (a restart
// cleans what a crash left), doctor's are its own (it may run beside a
// serving host).
type instance struct {
	bwrapPins  string // root host: where bwrap's bind sources are pinned
	dockerPins string // root host: where Docker's idmapped pins are made
	cgroup     string // bwrap's sandbox cgroups; "" is a random name, removed on close
	// checkLater runs bwrap's self-check beside start-up instead of
	// before it returns (serve: see checkedLater).
	checkLater bool
	gvisor     string // runsc's state, bundles and pins (root host)
}

func serveInstance(cfg config.Config) instance {
	return instance{bwrapPins: PinDir(cfg), dockerPins: filepath.Join(cfg.DataDir, "pins"), cgroup: CgroupName(cfg), checkLater: true,
		gvisor: filepath.Join(cfg.DataDir, "gvisor")}
}

// setupError is a step of the host's start that failed, with what the
// operator can do about it.
type setupError struct {
	err error
	fix string
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// fixOf is the fix a setupError in err's chain names, or "".
func fixOf(err error) string {
	if se, ok := errors.AsType[*setupError](err); ok {
		return se.fix
	}
	return ""
}

// prepareDataDir creates data/ private to the host: sandboxes reach their
// session dir and socket through pinned binds (root host), Docker's engine,
// or as the host user itself.
func prepareDataDir(dir string) error {
	mode := os.FileMode(0o700)
	for _, d := range []string{dir, filepath.Join(dir, "sessions"), runner.SocketsDir(dir)} {
		if err := os.MkdirAll(d, mode); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := os.Chmod(d, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	return nil
}

// AgentBin finds clawpen-agent: CLAWPEN_AGENT_BIN, beside this executable,
// then $PATH. The path is resolved: bind sources are opened with no symlink
// in any component.
func AgentBin(cfg config.Config) (string, error) {
	if cfg.AgentBin != "" {
		p, err := filepath.Abs(cfg.AgentBin)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
		if err != nil {
			return "", fmt.Errorf("CLAWPEN_AGENT_BIN=%s: %w", cfg.AgentBin, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(exe), "clawpen-agent")); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("clawpen-agent")
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return "", errors.New("clawpen-agent not found beside clawpen nor in $PATH: run `make build` or set CLAWPEN_AGENT_BIN")
	}
	return p, nil
}

// unavailable is the backend when no sandbox can be made: every run fails
// with the reason, so the chat and the log say why. Nothing runs unsandboxed.
type unavailable struct{ err error }

func (u unavailable) Name() string { return "none" }
func (u unavailable) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{}, fmt.Errorf("%w: %w", runner.ErrNoSandbox, u.err)
}

// Backend picks the sandbox backend as CLAWPEN_SANDBOX asks: docker, bwrap,
// or auto (Docker when the engine answers and the agent image exists, else
// bwrap). It never returns an unsandboxed runner: when nothing works it
// returns one that refuses every run with the reasons. The uid/gid are the
// host user the sandbox writes as (SandboxUser; -1 = the host's own); close
// releases the backend.
func Backend(ctx context.Context, cfg config.Config, log *slog.Logger) (sb runner.Sandbox, uid, gid int, close func()) {
	return backend(ctx, cfg, serveInstance(cfg), log)
}

// RunBackend is Backend for `clawpen run`: with pins and cgroups of its
// own, removed on close, so it may run beside serve (whose start cleans its
// own). It fails closed like Backend.
func RunBackend(ctx context.Context, cfg config.Config, log *slog.Logger) (sb runner.Sandbox, uid, gid int, close func()) {
	inst, clean := ownInstance(cfg, "run")
	sb, uid, gid, closeSB := backend(ctx, cfg, inst, log)
	return sb, uid, gid, func() { closeSB(); clean() }
}

// Unavailable is why sb refuses every run (no backend works), or nil.
func Unavailable(sb runner.Sandbox) error {
	if u, ok := sb.(unavailable); ok {
		return u.err
	}
	return nil
}

func backend(ctx context.Context, cfg config.Config, inst instance, log *slog.Logger) (sb runner.Sandbox, uid, gid int, close func()) {
	noop := func() {}
	uid, gid, err := SandboxUser(cfg.SandboxUser)
	if err != nil {
		return unavailable{fmt.Errorf("no sandbox: %w", err)}, -1, -1, noop
	}
	if err := privateParents(cfg, gid); err != nil {
		return unavailable{fmt.Errorf("no sandbox: what sandboxes write would be reachable by other host users: %w", err)}, -1, -1, noop
	}
	if cfg.Sandbox == "gvisor" {
		g, err := gvisorBackend(ctx, cfg, inst, uid, gid, log)
		if err != nil {
			return unavailable{fmt.Errorf("no sandbox: CLAWPEN_SANDBOX=gvisor: %w", err)}, -1, -1, noop
		}
		return g, uid, gid, func() { _ = g.Close() }
	}
	sb, uid, gid, closeHost := hostBackendFor(ctx, cfg, inst, uid, gid, log)
	if _, ok := sb.(unavailable); ok {
		return sb, uid, gid, closeHost
	}
	// gVisor beside it, for the profiles that ask for it: made on the first
	// such run, so a host none of whose groups asks pays nothing.
	r := &routed{Sandbox: sb, make: func(ctx context.Context) (*gvisor.Backend, error) {
		return gvisorBackend(ctx, cfg, inst, uid, gid, log)
	}}
	return r, uid, gid, func() { r.close(); closeHost() }
}

func hostBackendFor(ctx context.Context, cfg config.Config, inst instance, uid, gid int, log *slog.Logger) (sb runner.Sandbox, _, _ int, close func()) {
	noop := func() {}
	var reasons []string
	if cfg.Sandbox == "docker" || cfg.Sandbox == "auto" {
		d, err := dockerBackend(ctx, cfg, inst, uid, gid, log)
		if err == nil {
			return d, uid, gid, func() { _ = d.Close() }
		}
		if cfg.Sandbox == "docker" {
			return unavailable{fmt.Errorf("no sandbox: CLAWPEN_SANDBOX=docker: %w", err)}, -1, -1, noop
		}
		log.Info("Docker sandbox not available; trying bubblewrap", "reason", err)
		reasons = append(reasons, "docker: "+err.Error())
	}
	b, err := bwrapBackend(ctx, cfg, inst, uid, gid, log)
	if err != nil {
		reasons = append(reasons, "bwrap: "+err.Error())
		return unavailable{fmt.Errorf("no sandbox: %s", strings.Join(reasons, "; "))}, uid, gid, noop
	}
	if inst.checkLater {
		c := checkLater(ctx, b, reasons, log)
		return c, uid, gid, func() { <-c.done; _ = b.Close() }
	}
	return b, uid, gid, func() { _ = b.Close() }
}

func bwrapBackend(ctx context.Context, cfg config.Config, inst instance, uid, gid int, log *slog.Logger) (*bwrap.Backend, error) {
	bin, err := AgentBin(cfg)
	if err != nil {
		return nil, &setupError{err, "run `make build` (builds bin/clawpen and bin/clawpen-agent)"}
	}
	bc := bwrap.Config{AgentBin: bin, RunAsUID: uid, RunAsGID: gid, CgroupName: inst.cgroup, ReuseCgroups: true, Logger: log}
	if os.Geteuid() == 0 {
		// The unprivileged sandbox user binds pinned copies of the sources,
		// so the project may live anywhere, /root included.
		bc.PinDir = inst.bwrapPins
		if err := sandbox.CleanPins(bc.PinDir); err != nil {
			return nil, err
		}
	}
	b, err := bwrap.New(bc)
	if err != nil {
		return nil, err
	}
	if !inst.checkLater {
		if err := checkBwrap(ctx, b); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	log.Info("sandbox cgroups", "where", b.Cgroups())
	return b, nil
}

// checkBwrap runs bwrap's self-check: a trivial sandbox with every
// namespace, limit and the seccomp filter a run has.
func checkBwrap(ctx context.Context, b *bwrap.Backend) error {
	if err := b.Check(ctx); err != nil {
		return &setupError{fmt.Errorf("bubblewrap cannot create its namespaces: %w", err),
			"allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0) " +
				"or run inside a VM/container that permits them"}
	}
	return nil
}

// checkedLater is serve's bwrap backend while and after its self-check
// runs beside start-up (a sandbox of its own, ~10 ms, no longer before the
// first getUpdates). Every run waits for the check; once it failed, every
// run is refused with its reason, as by an unavailable backend: nothing
// runs before the check passed.
type checkedLater struct {
	*bwrap.Backend
	done chan struct{} // closed when the check ended; err is set
	err  error
}

// checkLater starts b's self-check under ctx (serve's life); reasons are
// why the backends tried before bwrap do not work.
func checkLater(ctx context.Context, b *bwrap.Backend, reasons []string, log *slog.Logger) *checkedLater {
	c := &checkedLater{Backend: b, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		if err := checkBwrap(ctx, b); err != nil {
			if ctx.Err() != nil {
				c.err = fmt.Errorf("no sandbox: the host stopped before its sandbox check ended: %w", ctx.Err())
				return
			}
			c.err = fmt.Errorf("no sandbox: %s", strings.Join(append(reasons, "bwrap: "+err.Error()), "; "))
			log.Error("agents will not run", "reason", c.err)
		}
	}()
	return c
}

// Run waits for the check, then runs spec in bwrap, or refuses.
func (c *checkedLater) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return sandbox.Result{}, fmt.Errorf("wait for the sandbox check: %w", ctx.Err())
	}
	if c.err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: %w", runner.ErrNoSandbox, c.err)
	}
	return c.Backend.Run(ctx, spec)
}

// failed is why the check failed; nil while it runs and once it passed.
func (c *checkedLater) failed() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// dockerBackend connects to the engine and checks the image. The container
// runs as uid 1000. A root host on the Docker host binds idmapped pins, so
// that what it writes lands on disk as the sandbox user uid:gid. A host that
// is not root must be uid 1000 itself (the host image): the container then
// writes as the host's own user. A root host in a container cannot pin on
// the Docker host and is refused rather than let sandboxes write as
// whoever holds uid 1000 there.
func dockerBackend(ctx context.Context, cfg config.Config, inst instance, uid, gid int, log *slog.Logger) (*docker.Backend, error) {
	euid := os.Geteuid()
	if euid != 0 && euid != sandbox.UID {
		return nil, fmt.Errorf("the Docker sandbox writes as uid %d; run the host as root or as uid %d", sandbox.UID, sandbox.UID)
	}
	dc := docker.Config{Image: cfg.AgentImage, Runtime: cfg.DockerRuntime, Root: cfg.Root, HostRoot: cfg.HostRoot, Instance: cfg.DataDir, Logger: log}
	if euid == 0 {
		if dc.HostRoot != "" {
			return nil, errors.New("a root host in a container (CLAWPEN_HOST_ROOT) cannot make idmapped binds on the Docker host, " +
				"so sandboxes would write as whoever holds uid 1000 there: run the host container as uid 1000 (docs/host-container.md), " +
				"or run clawpen on the Docker host itself")
		}
		dc.PinDir = inst.dockerPins
		dc.DiskUID, dc.DiskGID = uid, gid
		if err := sandbox.CleanPins(dc.PinDir); err != nil {
			return nil, err
		}
	}
	d, err := docker.New(ctx, dc)
	if err != nil {
		return nil, &setupError{err, "install Docker (apt-get install docker.io) and start it, or use bwrap"}
	}
	if err := d.Check(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	if err := d.CheckHostRoot(ctx, cfg.DataDir, cfg.GroupsDir); err != nil {
		_ = d.Close()
		return nil, err
	}
	if err := os.MkdirAll(cfg.GroupsDir, 0o700); err != nil { // made private by privateParents
		_ = d.Close()
		return nil, fmt.Errorf("create %s: %w", cfg.GroupsDir, err)
	}
	if err := d.CheckPins(cfg.GroupsDir); err != nil {
		_ = d.Close()
		return nil, &setupError{fmt.Errorf("the sandbox's folders cannot be bound as %s: %w", cfg.SandboxUser, err),
			"keep groups/ and data/ on a filesystem that supports idmapped mounts (ext4, xfs, btrfs, tmpfs) on Linux 5.12 or later, or use bwrap"}
	}
	return d, nil
}

// Hooks are what a caller may change of the host Serve builds; `clawpen
// serve` passes the zero value, the host as it ships. They exist for
// clawpen-bench, which times this very host instead of wiring a copy of it.
type Hooks struct {
	// Sandbox, when set, wraps the backend Serve picked, after /status was
	// told what it is (the bench stamps each Run).
	Sandbox func(runner.Sandbox) runner.Sandbox
	// Pacing overrides Telegram's send limits (the bench turns them off:
	// holding an answer back for the chat's next free second is not the
	// host's overhead).
	Pacing telegram.Pacing
}

// Serve runs the host until ctx is done.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger, hooks Hooks) error {
	if err := cfg.RequireServe(); err != nil {
		return err
	}
	if cfg.DebugAddr != "" {
		// Its own context, so an early error return also stops it.
		dctx, stopDebug := context.WithCancel(ctx)
		waitDebug, err := startDebug(dctx, cfg.DebugAddr, log)
		if err != nil {
			stopDebug()
			return err
		}
		defer waitDebug()
		defer stopDebug()
	}
	m := newMetrics(cfg)
	hs := newHealth()
	if cfg.MetricsAddr != "" {
		mctx, stopMetrics := context.WithCancel(ctx)
		waitMetrics, err := startMetrics(mctx, cfg, m, hs, log)
		if err != nil {
			stopMetrics()
			return err
		}
		defer waitMetrics()
		defer stopMetrics()
	}
	lead, err := takeLead(ctx, cfg, hs, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while standing by
		}
		return err
	}
	if lead != nil {
		defer lead.Release()
		ctx = lead.Context()
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	// Sockets of invocations that a crash left behind; their sandboxes died with us.
	// (OpenStore made the directory.)
	stale, err := os.ReadDir(runner.SocketsDir(cfg.DataDir))
	if err != nil {
		return fmt.Errorf("list stale sockets: %w", err)
	}
	for _, e := range stale {
		if err := os.RemoveAll(filepath.Join(runner.SocketsDir(cfg.DataDir), e.Name())); err != nil {
			return fmt.Errorf("remove stale sockets: %w", err)
		}
	}

	mountPolicy := MountPolicy(cfg, log)
	_, _ = mountPolicy.Current() // load now so a malformed file is reported at start

	backend, uid, gid, closeBackend := Backend(ctx, cfg, log)
	defer closeBackend()
	if os.Geteuid() == 0 {
		// Every run releases its pins; drop the host's pin directory too.
		defer func() { _ = sandbox.CleanPins(PinDir(cfg)); _ = os.Remove(PinDir(cfg)) }()
	}
	// Containers do not die with the host; remove what a crash left. (A
	// bwrap sandbox dies with its host: bwrap is its PID namespace's init.)
	if b, ok := hostBackend(backend).(*docker.Backend); ok {
		n, err := b.RemoveOrphans(ctx)
		if err != nil {
			return fmt.Errorf("remove orphaned sandbox containers: %w", err)
		}
		if n > 0 {
			log.Info("removed orphaned sandbox containers", "count", n)
		}
	}
	host := router.HostStatus{Backend: backend.Name(), User: "the host's own user", DiskQuota: cfg.DiskMB << 20, Model: cfg.Model}
	if uid >= 0 {
		host.User = cfg.SandboxUser
	}
	switch b := hostBackend(backend).(type) {
	case unavailable:
		log.Error("agents will not run", "reason", b.err)
		host = router.HostStatus{NoSandbox: b.err.Error(), Model: cfg.Model}
	case *bwrap.Backend:
		host.Limits = "cgroup " + string(b.CgroupMode())
	case *checkedLater:
		host.Limits = "cgroup " + string(b.CgroupMode())
	case *docker.Backend:
		host.Limits = "Docker's cgroups"
	case *gvisor.Backend:
		host.Limits = "runsc's cgroups"
	}
	if host.Backend != "" {
		log.Info("sandbox ready", "backend", backend.Name(), "user", host.User, "uid", uid, "gid", gid)
	}

	// A Bot API that does not answer at start (a dropped connection, an
	// outage) is waited for, as the poll loop waits for it later; a token
	// it refuses ends serve at once.
	var tg *telegram.Client
	for wait := (retry.Backoff{First: time.Second, Max: 30 * time.Second}); ; {
		tg, err = telegram.New(ctx, telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramAPIURL, Logger: log, Pacing: hooks.Pacing})
		if !errors.Is(err, telegram.ErrUnreachable) {
			break
		}
		d := wait.Next()
		log.Warn("Telegram does not answer; trying again", "err", err, "in", d)
		if serr := retry.Sleep(ctx, d); serr != nil {
			err = serr
			break
		}
	}
	if err != nil {
		return fmt.Errorf("connect to Telegram: %w", err)
	}
	chosen := backend
	backend = m.Sandbox(backend)
	if hooks.Sandbox != nil {
		backend = hooks.Sandbox(backend)
	}
	h, err := NewHost(ctx, cfg, Parts{Store: st, Telegram: tg, Sandbox: backend, RunAsUID: uid, RunAsGID: gid, Status: host, Mounts: mountPolicy, Metrics: m}, log)
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		serving(m, hs, h, chosen)
	}

	if code := h.Router.PairingCode(); code != "" {
		fmt.Fprintf(os.Stdout, "No owner yet. Send this to @%s in a private chat to become the owner:\n\n    /pair %s\n\n", tg.Username(), code)
		log.Info("waiting for pairing", "bot", tg.Username())
	}
	err = h.Run(ctx)
	if lead != nil && lead.Err() != nil {
		// Another host may serve now; this one stopped. Exit non-zero, so
		// that a supervisor starts it again, to stand by.
		return lead.Err()
	}
	return err
}

// takeLead, with PostgreSQL (CLAWPEN_DATABASE_URL), returns once this host
// holds its database's serving lock (store.TakeLead), standing by until
// then; nil with SQLite. It is taken before the host touches anything
// hosts of one database share (the migrations, the orphans and sockets of
// a shared data dir), so a standby changes nothing while it waits. The
// host runs under the lock's context, which ends at once when the hold is
// lost.
func takeLead(ctx context.Context, cfg config.Config, hs *health, log *slog.Logger) (*store.Lead, error) {
	if cfg.DatabaseURL == "" {
		return nil, nil
	}
	host, _ := os.Hostname()
	name := fmt.Sprintf("clawpen serve on %s, pid %d", host, os.Getpid())
	lead, err := store.TakeLead(ctx, cfg.DatabaseURL, name, func(holder string, err error) {
		if err != nil {
			hs.set("standby: the database does not answer: " + err.Error())
			log.Warn("standing by: the database does not answer", "err", err)
			return
		}
		hs.set("standby: another host serves this database: " + holder)
		log.Info("standing by: another host serves this database; waiting for it to stop", "holder", holder)
	})
	if err != nil {
		return nil, err
	}
	hs.set("starting")
	log.Info("serving the database: holding its serving lock", "as", name)
	return lead, nil
}

// Parts are what a host is built on: its store, its Telegram client, its
// sandbox backend (and the user sandboxes write as: -1 the host's own),
// what /status says of that backend, and the mount allowlist.
type Parts struct {
	Store              *store.Store
	Telegram           *telegram.Client
	Sandbox            runner.Sandbox
	RunAsUID, RunAsGID int
	Status             router.HostStatus
	Mounts             *mounts.Policy
	// Metrics hears what the host does; nil counts nothing.
	Metrics *hostMetrics
}

// ownerMenu is the command menu of the owner's chat.
func ownerMenu() []telegram.Command {
	cmds := make([]telegram.Command, 0, len(router.Commands))
	for _, c := range router.Commands {
		cmds = append(cmds, telegram.Command{Name: c.Name, Description: c.Description})
	}
	return cmds
}

// Host is serve's components, each built with what it needs, in the order
// they depend on each other: the operations service, the runner (which
// answers its sockets through the service), the router (which runs the
// runner from its queue and asks the service for the owner's commands) and
// the scheduler (which hands due tasks to the router, and hears from the
// service when tasks change). The Telegram client feeds the router.
type Host struct {
	Ops       *ops.Service
	Runner    *runner.Runner
	Router    *router.Router
	Scheduler *scheduler.Scheduler
	// Approvals asks the owner about what waits for the owner's press;
	// the owner's presses come to it from the Telegram poll.
	Approvals *approval.Broker

	store       *store.Store
	telegram    *telegram.Client
	retention   time.Duration // CLAWPEN_RETENTION; 0 keeps everything
	groupsDir   string
	sandboxUser beneath.User // whose rights inboxes are pruned with
	log         *slog.Logger
}

// NewHost builds the host's components on p, as cfg says.
func NewHost(ctx context.Context, cfg config.Config, p Parts, log *slog.Logger) (*Host, error) {
	approvals := approval.New(approval.Config{Store: p.Store, Messenger: p.Telegram, Timeout: cfg.ApprovalTimeout, TZ: cfg.TZ, Logger: log,
		Owner: func(ctx context.Context) (int64, error) { return p.Store.Owner(ctx, cfg.OwnerID) }})
	sandboxUser := beneath.User{UID: p.RunAsUID, GID: p.RunAsGID}
	toolsDir := tools.NewDir(cfg.ToolsDir)
	operations := ops.New(ops.Config{Store: p.Store, GroupsDir: cfg.GroupsDir, SandboxUser: sandboxUser, Loc: cfg.TZ, MinInterval: cfg.MinInterval, Mounts: p.Mounts, Profiles: cfg.Profiles,
		Tools: toolsDir, ToolEnv: cfg.HostEnv, Approvals: approvals, Guard: Guard(cfg, toolsDir), Logger: log,
		Refused: func(op ops.Op) { p.Metrics.IPCRefused(string(op)) }})
	run, err := NewRunner(cfg, p, operations, log)
	if err != nil {
		return nil, err
	}
	rt, err := router.New(ctx, router.Config{
		Store: p.Store, Messenger: p.Telegram, Agents: run, Ops: operations,
		OwnerID: cfg.OwnerID, AssistantName: cfg.AssistantName, BotUsername: p.Telegram.Username(),
		TZ: cfg.TZ, Logger: log, MaxConcurrent: cfg.MaxConcurrent, RetryBackoff: cfg.RetryBackoff,
		Host: p.Status, Mounts: p.Mounts, DefaultPolicy: cfg.SenderPolicy, SenderRate: cfg.SenderRate, Observer: p.Metrics,
		Profile: func(name string) (domain.Profile, error) { return config.ResolveProfile(cfg.Profiles, name) },
		Now:     cfg.UsageNow,
		Files:   p.Telegram, GroupsDir: cfg.GroupsDir, MaxFileBytes: cfg.MaxFileMB << 20, SandboxUser: sandboxUser,
		Transcriber: transcriber(cfg), TranscribeDailySeconds: cfg.TranscribeDailySeconds,
		Drafts: p.Telegram, Guard: operations.Guard(),
		Menu: func(ctx context.Context, owner int64) error {
			return p.Telegram.SetCommandMenu(ctx, owner, ownerMenu())
		},
	})
	if err != nil {
		return nil, err
	}
	sched := scheduler.New(scheduler.Config{
		Store: p.Store, Loc: cfg.TZ, MinInterval: cfg.MinInterval, Logger: log,
		Dispatch: rt.Schedule, Changed: operations.TasksChanged(),
	})
	return &Host{Ops: operations, Runner: run, Router: rt, Scheduler: sched, Approvals: approvals, store: p.Store, telegram: p.Telegram, retention: cfg.Retention,
		groupsDir: cfg.GroupsDir, sandboxUser: sandboxUser, log: log}, nil
}

// NewRunner is the runner serve builds on p, as cfg says, answering its
// sockets through operations; `clawpen run` builds its own with it.
func NewRunner(cfg config.Config, p Parts, operations *ops.Service, log *slog.Logger) (*runner.Runner, error) {
	roots, err := UpstreamRoots(cfg)
	if err != nil {
		return nil, err
	}
	limits := sandbox.DefaultLimits
	limits.Timeout = cfg.AgentTimeout
	limits.DiskBytes = cfg.DiskMB << 20
	return runner.New(runner.Config{
		GroupsDir: cfg.GroupsDir, DataDir: cfg.DataDir, RunAsUID: p.RunAsUID, RunAsGID: p.RunAsGID,
		AssistantName: cfg.AssistantName, Provider: cfg.Provider(), Model: cfg.Model,
		Env: cfg.SandboxEnv(), Limits: limits, Logger: log, ContextTokens: cfg.ContextTokens,
		Upstreams: hostsock.Config{
			Anthropic: hostsock.Upstream{BaseURL: cfg.AnthropicBaseURL, APIKey: cfg.AnthropicKey},
			OpenAI:    hostsock.Upstream{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIKey},
			MaxTokens: cfg.MaxTokens,
			Egress:    hostsock.EgressLimits{MaxBytes: cfg.EgressMB << 20},
			Getenv:    cfg.HostEnv, UpstreamRoots: roots,
		},
		SystemRoots: SystemRootsPEM(),
		Ops:         operations, Mounts: p.Mounts, Audit: countedAudit(p.Store.Audit, p.Metrics),
		Profile: func(name string) (domain.Profile, error) { return config.ResolveProfile(cfg.Profiles, name) },
		Usage:   countedUsage{p.Store, p.Metrics}, Now: cfg.UsageNow, TZ: cfg.TZ,
		Warm:  runner.WarmConfig{Size: cfg.Warm, Idle: cfg.WarmIdle, Group: p.Store.GroupByFolder},
		Guard: operations.Guard(),
	}, p.Sandbox), nil
}

// Run serves until ctx is done: the router (its queues and delivery), the
// scheduler, and the Telegram poll that feeds the router, from the offset
// the last run saved. It returns once everything that writes to the store
// has stopped; an error of one part stops the others.
func (h *Host) Run(ctx context.Context) error {
	offset := int64(0)
	if v, ok, err := h.store.State(ctx, offsetKey); err != nil {
		return fmt.Errorf("read update offset: %w", err)
	} else if ok {
		offset, _ = strconv.ParseInt(v, 10, 64)
	}
	// Requests a previous host left waiting for the owner: their runs are gone.
	if err := h.Approvals.Start(ctx); err != nil {
		return fmt.Errorf("expire waiting approvals: %w", err)
	}
	h.log.Info("clawpen serving", "bot", h.telegram.Username(), "sandbox", h.Runner.Backend(), "offset", offset)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// What waits for the owner is refused as the host stops, so the
		// runs hear a denial rather than only their end.
		<-gctx.Done()
		h.Approvals.Close()
		return nil
	})
	h.Runner.StartWarm(gctx)
	g.Go(func() error { return h.Router.Run(gctx) })
	g.Go(func() error { return h.Scheduler.Run(gctx) })
	if h.retention > 0 {
		g.Go(func() error { h.pruneLoop(gctx); return nil })
	}
	// Not part of the group: it ends with ctx and never fails the host.
	go pageOutWhenIdle(gctx, h.log)
	g.Go(func() error {
		err := h.telegram.Poll(gctx, offset,
			func(ctx context.Context, u telegram.Update) error {
				switch {
				case u.Press != nil:
					return h.Approvals.Press(ctx, *u.Press)
				case u.Message != nil:
					return h.Router.Handle(ctx, *u.Message)
				}
				return nil
			},
			func(ctx context.Context, next int64) error {
				// The update was handled; persist that even during shutdown, or
				// a restart would offer it again.
				return h.store.SetState(context.WithoutCancel(ctx), offsetKey, strconv.FormatInt(next, 10))
			})
		if gctx.Err() != nil {
			return nil // shutting down (or another part failed: its error is the one)
		}
		return err
	})
	err := g.Wait()
	h.Runner.StopWarm()
	return err
}
