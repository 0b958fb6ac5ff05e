// Package docker runs one agent invocation inside an ephemeral, non-root Docker
// container with the view described in DESIGN.md ("Sandbox contract"): the same
// Spec in and Result out as the bubblewrap backend.
//
// Limits: wall time and output size are enforced by the host (the container is
// killed); memory (no swap on top), process count and CPU (sandbox.Limits) are
// cgroup limits set by the engine. A container outlives a host that crashes, so the host calls
// RemoveOrphans at start; every container carries the label clawpen.invocation.
//
// Bind sources are paths on the Docker host. When the clawpen host itself runs
// in a container, its paths differ from the engine's: Config.Root and
// Config.HostRoot translate each bind source, and refuse one the engine
// cannot see.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/clawpen/clawpen/internal/sandbox"
)

// DefaultImage is the agent image the host runs unless configured otherwise.
const DefaultImage = "clawpen-agent:latest"

// engineTimeout bounds the calls made with a fresh context after ctx is
// gone (kill, inspect, remove): a cancelled ctx does not stop a container.
const engineTimeout = 30 * time.Second

// Config configures the backend.
type Config struct {
	// Image is the agent image; default DefaultImage.
	Image string
	// Runtime is the OCI runtime (for example runsc for gVisor); empty means
	// the engine's default (CLAWPEN_DOCKER_RUNTIME).
	Runtime string
	// Root and HostRoot are set when the clawpen host itself runs in a
	// container that sees the Docker host's directory HostRoot at Root
	// (CLAWPEN_ROOT, CLAWPEN_HOST_ROOT). The engine binds from the Docker
	// host's filesystem, so a bind source must lie under Root and is handed
	// over as the same path under HostRoot; a source elsewhere fails the run
	// rather than bind whatever the Docker host has at that path. Both
	// empty: the host runs on the Docker host and sources go unchanged.
	Root, HostRoot string
	// Host is the engine address (unix:///var/run/docker.sock, tcp://…); empty
	// means DOCKER_HOST or the default socket.
	Host string
	// Command, when non-empty, replaces the image's agent as the container's
	// command. For tests and benchmarks only.
	Command []string
	// PinDir, when set, holds per-invocation staging binds of every bind
	// source (see pin.go). It needs root and an engine in the host's mount
	// namespace; never inside a directory a sandbox can see.
	PinDir string
	// DiskUID and DiskGID, with PinDir, make every pin idmapped: what the
	// container's uid/gid 1000 writes lands on disk as DiskUID:DiskGID (the
	// dedicated sandbox user), files of that user appear as 1000 inside, and
	// files of anyone else as nobody. 0 (unset) keeps plain pins; root is
	// never a disk owner.
	DiskUID, DiskGID int
	// Instance names this host (its data dir, say): containers carry it as
	// the label clawpen.instance and RemoveOrphans touches only those, so two
	// hosts sharing an engine never remove each other's sandboxes.
	Instance string
	Logger   *slog.Logger
}

// LabelInstance carries Config.Instance.
const LabelInstance = "clawpen.instance"

// Backend runs invocations in Docker containers. Safe for concurrent use.
type Backend struct {
	cfg Config
	cli *client.Client
	log *slog.Logger
	// scope labels every container and narrows RemoveOrphans to them; tests
	// use it so that concurrent test runs do not remove each other's.
	scope map[string]string
	// afterPin is a test hook: it runs once the bind sources are pinned.
	afterPin func()
	idmap    *sandbox.IDMap // with Config.DiskUID
	nobody   *sandbox.IDMap // groups/global for non-main groups (see pin.go)
	// seccomp is the profile every container runs under, built once.
	seccomp string
}

// New connects to the engine and negotiates the API version (the engine may be
// older than the client; API 1.40 is the oldest this client speaks).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.HostRoot != "" {
		if !filepath.IsAbs(cfg.Root) || !filepath.IsAbs(cfg.HostRoot) {
			return nil, fmt.Errorf("docker: Root %q and HostRoot %q must be absolute", cfg.Root, cfg.HostRoot)
		}
		// A pin is a path of this process's mount namespace: the engine of
		// a host in a container could not bind it.
		if cfg.PinDir != "" {
			return nil, errors.New("docker: pins need a host on the Docker host, not in a container (HostRoot)")
		}
		cfg.Root, cfg.HostRoot = filepath.Clean(cfg.Root), filepath.Clean(cfg.HostRoot)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("docker engine not reachable at %s: %w", cli.DaemonHost(), err)
	}
	profile, err := sandbox.DockerSeccompProfile()
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	b := &Backend{cfg: cfg, cli: cli, log: log, seccomp: profile}
	if cfg.DiskUID != 0 || cfg.DiskGID != 0 {
		if cfg.PinDir == "" {
			_ = cli.Close()
			return nil, errors.New("docker: a disk owner needs PinDir (idmapped pins)")
		}
		if b.idmap, err = sandbox.NewIDMap(cfg.DiskUID, cfg.DiskGID, sandbox.UID, sandbox.GID); err == nil {
			b.nobody, err = sandbox.NewIDMap(cfg.DiskUID, cfg.DiskGID, sandbox.Nobody, sandbox.Nobody)
		}
		if err != nil {
			_ = b.idmap.Close()
			_ = cli.Close()
			return nil, fmt.Errorf("docker: %w", err)
		}
	}
	if cfg.Instance != "" {
		b.scope = map[string]string{LabelInstance: cfg.Instance}
	}
	log.Debug("docker engine connected", "host", cli.DaemonHost(), "api", cli.ClientVersion())
	return b, nil
}

// Name is the backend's name in configuration and logs.
func (b *Backend) Name() string { return "docker" }

// APIVersion is the negotiated Engine API version.
func (b *Backend) APIVersion() string { return b.cli.ClientVersion() }

// Image is the agent image in use.
func (b *Backend) Image() string { return b.cfg.Image }

// Client is the engine client, for callers that share the connection.
func (b *Backend) Client() *client.Client { return b.cli }

// Close releases the engine connection and the idmap.
func (b *Backend) Close() error {
	_ = b.idmap.Close()
	_ = b.nobody.Close()
	return b.cli.Close()
}

// Check reports why the backend cannot run sandboxes: the engine does not
// answer, cannot enforce the limits, lacks the configured runtime, or the image
// is missing.
func (b *Backend) Check(ctx context.Context) error {
	info, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("docker engine not answering at %s: %w", b.cli.DaemonHost(), err)
	}
	if !info.Info.MemoryLimit || !info.Info.PidsLimit {
		return fmt.Errorf("docker engine cannot enforce sandbox limits (memory limit: %t, pids limit: %t): enable the memory and pids cgroup controllers",
			info.Info.MemoryLimit, info.Info.PidsLimit)
	}
	if b.cfg.Runtime != "" {
		if _, ok := info.Info.Runtimes[b.cfg.Runtime]; !ok {
			return fmt.Errorf("docker runtime %q is not configured in the engine (CLAWPEN_DOCKER_RUNTIME)", b.cfg.Runtime)
		}
	}
	if _, err := b.cli.ImageInspect(ctx, b.cfg.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("image %s not found: run `make image` (or clawpen image build)", b.cfg.Image)
		}
		return fmt.Errorf("inspect image %s: %w", b.cfg.Image, err)
	}
	return nil
}

// RemoveOrphans removes every container labelled clawpen.invocation, in any
// state: after a crash of the host they are sandboxes nobody waits for.
func (b *Backend) RemoveOrphans(ctx context.Context) (int, error) {
	filters := make(client.Filters).Add("label", LabelInvocation)
	for k, v := range b.scope {
		filters.Add("label", k+"="+v)
	}
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return 0, fmt.Errorf("list clawpen containers: %w", err)
	}
	n := 0
	var errs []error
	for _, c := range list.Items {
		_, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", c.ID, err))
			continue
		}
		b.log.Info("removed orphaned sandbox", "container", shortID(c.ID),
			"invocation", c.Labels[LabelInvocation], "group", c.Labels[LabelGroup], "state", c.State)
		n++
	}
	return n, errors.Join(errs...)
}

// Run creates the container for spec, feeds it spec.Stdin, copies its stdout
// to spec.Stdout (capped), and returns once the container has exited and been
// removed. An error means the sandbox could not be set up (nothing ran) or ctx
// was cancelled; the agent's own failure is a non-zero Result.ExitCode.
func (b *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return b.run(ctx, spec, spec.Command)
}

func (b *Backend) run(ctx context.Context, spec sandbox.Spec, command []string) (sandbox.Result, error) {
	var res sandbox.Result
	cfg, hostCfg, err := b.createConfig(spec, command)
	if err != nil {
		return res, fmt.Errorf("docker sandbox for %s: %w", spec.Group, err)
	}
	pinned, err := b.pin(spec)
	defer pinned.release() // runs last: after the container is removed
	if err != nil {
		return res, fmt.Errorf("docker sandbox for %s: %w", spec.Group, err)
	}
	pinned.apply(hostCfg.Mounts)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("sandbox run cancelled: %w", err)
	}
	// Engine calls use contexts of their own: a cancellation half-way through
	// create or start could leave a container we do not know about, or one
	// that runs while we think it never started. ctx is watched once it runs.
	bg := context.WithoutCancel(ctx)
	setup, cancelSetup := context.WithTimeout(bg, engineTimeout)
	defer cancelSetup()

	created, err := b.cli.ContainerCreate(setup, client.ContainerCreateOptions{
		Config: cfg, HostConfig: hostCfg, Name: containerName(spec.InvocationID),
	})
	if err != nil {
		return res, fmt.Errorf("create sandbox container for %s: %w", spec.Group, err)
	}
	id := created.ID
	log := b.log.With("invocation", spec.InvocationID, "group", spec.Group, "container", shortID(id))
	for _, w := range created.Warnings {
		log.Warn("docker create warning", "warning", w)
	}
	defer b.remove(bg, id, log)

	// Attach and register the wait before start: a fast agent may otherwise
	// write (or exit) before anyone listens.
	att, err := b.cli.ContainerAttach(setup, id, client.ContainerAttachOptions{
		Stream: true, Stdin: true, Stdout: true, Stderr: true, DetachKeys: detachKeys,
	})
	if err != nil {
		return res, fmt.Errorf("attach to sandbox container: %w", err)
	}
	waitCtx, stopWait := context.WithCancel(bg)
	defer stopWait()
	p := &proc{b: b, bg: bg, setup: setup, id: id, log: log, stdio: spec.Stdio,
		wait: b.cli.ContainerWait(waitCtx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})}
	// The job is JSON, whose encoding escapes control characters, so it can
	// never contain the engine's detach sequence (ctrl-p ctrl-q). The
	// owner's input may (see detachKeys).
	st := sandbox.Streams{
		In: att.Conn, Out: att.Reader,
		CloseIn: func() {
			// With StdinOnce the engine closes the agent's stdin on our half-close.
			if err := att.CloseWrite(); err != nil {
				log.Debug("close sandbox stdin", "err", err)
			}
		},
		Close: att.Close,
	}
	if !cfg.Tty {
		// Without a TTY, stdout and stderr arrive multiplexed; a terminal's
		// stream is raw, stdout and stderr as one.
		st.Demux = stdcopy.StdCopy
	}
	return sandbox.Supervise(ctx, spec, p, st, log)
}

// proc is one container as sandbox.Supervise drives it.
type proc struct {
	b         *Backend
	bg, setup context.Context
	id        string
	log       *slog.Logger
	stdio     *sandbox.Stdio
	wait      client.ContainerWaitResult
	started   time.Time
	pids      *pidsWatch
	procs     bool // the process limit refused a fork
}

func (p *proc) Start() error {
	p.started = time.Now()
	if _, err := p.b.cli.ContainerStart(p.setup, p.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start sandbox container: %w", err)
	}
	if st := p.stdio; st != nil && st.TTY && st.Rows > 0 && st.Cols > 0 {
		p.Resize(sandbox.WinSize{Rows: st.Rows, Cols: st.Cols})
	}
	return nil
}

// Ready watches the container's process limit from before its job is
// given, that is, before it does anything.
func (p *proc) Ready() error {
	p.pids = p.b.watchPidsOf(p.bg, p.id, p.log)
	return nil
}

func (p *proc) Kill() { p.b.kill(p.bg, p.id, p.log) }

// Wait returns once the container has exited: its init, and with it every
// process of the container, is gone.
func (p *proc) Wait(ended func()) (int, error) {
	code, err := -1, error(nil)
	select {
	case r := <-p.wait.Result:
		code = int(r.StatusCode)
		if r.Error != nil && r.Error.Message != "" {
			err = fmt.Errorf("wait for sandbox container: %s", r.Error.Message)
		}
	case werr := <-p.wait.Error:
		err = fmt.Errorf("wait for sandbox container: %w", werr)
		// The engine connection is gone; make sure the container does not run on.
		p.Kill()
	}
	ended()
	if p.pids != nil {
		p.procs = p.pids.stop()
	}
	return code, err
}

func (p *proc) Resize(sz sandbox.WinSize) {
	ctx, cancel := context.WithTimeout(p.bg, engineTimeout)
	defer cancel()
	if _, err := p.b.cli.ContainerResize(ctx, p.id, client.ContainerResizeOptions{Height: uint(sz.Rows), Width: uint(sz.Cols)}); err != nil {
		p.log.Debug("size the sandbox's terminal", "err", err)
	}
}

func (p *proc) Finish(res *sandbox.Result) error {
	killedByOther := res.ExitCode == 128+int(syscall.SIGKILL) && !res.TimedOut && !res.OutputTruncated
	res.Limit = p.b.reached(p.bg, p.id, p.started, killedByOther, p.procs, p.log)
	return nil
}

func (b *Backend) kill(ctx context.Context, id string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err := b.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		// Conflict: the container is not running any more.
		log.Warn("kill sandbox container", "err", err)
	}
}

func (b *Backend) remove(ctx context.Context, id string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		log.Error("remove sandbox container; it is removed at the next start", "err", err)
	}
}

// detachKeys is the engine's detach sequence for our attach: one the owner
// of `clawpen run` is unlikely to type (ctrl-p ctrl-q is common in shells).
// Detaching would only leave the container to its time limit.
const detachKeys = "ctrl-],ctrl-],ctrl-],ctrl-]"

var nameSafe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// containerName names the container after the invocation, for `docker ps`;
// empty (an engine-chosen name) when the id is not a valid container name.
func containerName(invocation string) string {
	if !nameSafe.MatchString(invocation) {
		return ""
	}
	return "clawpen-" + invocation
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Fingerprint is the agent image's id now: a rebuilt image makes sandboxes
// started before it stale.
func (b *Backend) Fingerprint(ctx context.Context) (string, error) {
	img, err := b.cli.ImageInspect(ctx, b.cfg.Image)
	if err != nil {
		return "", fmt.Errorf("fingerprint image %s: %w", b.cfg.Image, err)
	}
	return img.ID, nil
}
