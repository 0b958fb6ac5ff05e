package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
	"github.com/clawpen/clawpen/internal/sandbox/gvisor"
)

// Row names of the sandbox start section; ratios name the raw baselines.
const (
	rowForkExec       = "fork-exec /bin/true"
	rowRawBwrap       = "raw bwrap /bin/true"
	rowRawBwrapMin    = "raw bwrap, minimal view, /bin/true"
	rowBwrapTrue      = "clawpen bwrap /bin/true"
	rowBwrapBaseline  = "clawpen bwrap agent-ready, no cgroup/seccomp/keyring"
	rowBwrapReady     = "clawpen bwrap agent-ready"
	rowBwrapPinned    = "clawpen bwrap agent-ready, pinned"
	rowDockerCLI      = "docker run --rm (CLI)"
	rowDockerClient   = "docker Go client create→start→wait→remove"
	rowDockerReady    = "clawpen docker agent-ready"
	rowGVisorReady    = "clawpen gvisor agent-ready"
	readyTargetFactor = 1.5
)

// dockerRuns is the sample count of the Docker rows: a container costs
// hundreds of milliseconds, so they take fewer runs than the rest.
func (o Options) dockerRuns() int {
	if o.Quick {
		return 5
	}
	return min(o.runs(), 30)
}

func sandboxStart(ctx context.Context, o Options) Section {
	s := Section{Name: "sandbox start"}
	runs := o.runs()
	measure := func(name, ratioTo string, n int, f func(context.Context, int) ([]time.Duration, error)) *Row {
		o.progress("bench: sandbox start: %s, %d runs", name, n)
		lat, err := f(ctx, n)
		r := Latency(name, lat)
		if err != nil {
			r = Row{Name: name, Skipped: err.Error()}
		}
		r.RatioTo = ratioTo
		s.Rows = append(s.Rows, r)
		return &s.Rows[len(s.Rows)-1]
	}
	if err := becomeSubreaper(); err != nil {
		return Section{Name: s.Name, Skipped: err.Error()}
	}
	measure(rowForkExec, "", runs, forkExecTrue)
	raw := *measure(rowRawBwrap, "", runs, func(ctx context.Context, n int) ([]time.Duration, error) {
		return rawBwrapClawpenFlags(ctx, o, n)
	})
	measure(rowRawBwrapMin, rowRawBwrap, runs, func(ctx context.Context, n int) ([]time.Duration, error) {
		return rawBwrapTrue(ctx, o, n)
	})
	measure(rowBwrapTrue, rowRawBwrap, runs, func(ctx context.Context, n int) ([]time.Duration, error) {
		return bwrapRun(ctx, o, n, bwrapPlain, "/bin/true")
	})
	measure(rowBwrapBaseline, rowRawBwrap, runs, func(ctx context.Context, n int) ([]time.Duration, error) {
		return bwrapRun(ctx, o, n, bwrapPlain|bwrapBaseline)
	})
	ready := measure(rowBwrapReady, rowRawBwrap, runs, func(ctx context.Context, n int) ([]time.Duration, error) {
		return bwrapRun(ctx, o, n, bwrapPlain)
	})
	if ready.Skipped == "" && raw.Skipped == "" && raw.P50 > 0 {
		met := float64(ready.P50) <= readyTargetFactor*float64(raw.P50)
		*ready = ready.WithTarget(fmt.Sprintf("p50 ≤ %.1f× raw bwrap", readyTargetFactor), met)
	}
	if os.Geteuid() == 0 {
		measure(rowBwrapPinned, rowRawBwrap, runs, func(ctx context.Context, n int) ([]time.Duration, error) {
			return bwrapRun(ctx, o, n, bwrapPinned)
		})
	} else {
		s.Rows = append(s.Rows, Row{Name: rowBwrapPinned, Skipped: "pinning is what a root host does; not root"})
	}

	dr := o.dockerRuns()
	if why := dockerUnavailable(ctx, o.Image); why != "" {
		for _, n := range []string{rowDockerCLI, rowDockerClient, rowDockerReady} {
			s.Rows = append(s.Rows, Row{Name: n, Skipped: why})
		}
	} else {
		measure(rowDockerCLI, "", dr, func(ctx context.Context, n int) ([]time.Duration, error) {
			return dockerCLIRun(ctx, o.Image, n)
		})
		measure(rowDockerClient, rowDockerCLI, dr, func(ctx context.Context, n int) ([]time.Duration, error) {
			return dockerClientRun(ctx, o.Image, n)
		})
		measure(rowDockerReady, rowDockerCLI, dr, func(ctx context.Context, n int) ([]time.Duration, error) {
			return dockerAgentReady(ctx, o, n)
		})
	}
	if why := gvisorUnavailable(ctx); why != "" {
		s.Rows = append(s.Rows, Row{Name: rowGVisorReady, Skipped: why})
	} else {
		measure(rowGVisorReady, rowRawBwrap, dr, func(ctx context.Context, n int) ([]time.Duration, error) {
			return gvisorAgentReady(ctx, o, n)
		})
	}
	s.Notes = []string{
		"each row is the wall time of one start, from the call to the exit of /bin/true or, for agent-ready, to the first byte clawpen-agent writes (its ready line; stdin is \"{}\", which it then refuses).",
		"raw bwrap: bwrap run by hand as the sandbox user with exactly clawpen's command line and descriptors (namespaces, capabilities, synthesised /etc, binds); clawpen bwrap adds what Backend.Run does around it: opening and checking the bind sources, the sandbox's cgroup (made, the init moved in and its rlimits set while bwrap waits on --block-fd, removed after), output capping and namespace-init reaping. The minimal-view row is bwrap with the same namespace flags and only /usr, /proc, /dev and /tmp.",
		"pinned: every bind source pinned under a staging directory first, as a root `clawpen serve` does.",
		"no cgroup/seccomp/keyring: the same backend without the sandbox's cgroup, its seccomp filter and its fresh session keyring (bwrap.NewBaseline), i.e. agent-ready as it was before they came; the row below it is what every sandbox costs now.",
	}
	if slices.ContainsFunc(s.Rows, func(r Row) bool { return r.Name == rowDockerReady && r.Skipped == "" }) {
		s.Notes = append(s.Notes, fmt.Sprintf("Docker rows take %d runs, not %d (a container costs ~100× a bwrap sandbox); image %s.", dr, runs, o.Image))
	}
	s.Notes = append(s.Notes, fmt.Sprintf("gvisor agent-ready: `runsc run` of clawpen's OCI bundle (the bwrap view, ptrace platform, network none) with the host-made cgroup, %d runs as the Docker rows.", dr))
	return s
}

// forkExecTrue is the floor: starting any process at all.
func forkExecTrue(ctx context.Context, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := exec.CommandContext(ctx, "/bin/true").Run(); err != nil {
			return nil, fmt.Errorf("/bin/true: %w", err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// rawBwrapArgs are clawpen's namespace and capability flags around a minimal
// view of /usr: bwrap itself, without clawpen's preparation.
var rawBwrapArgs = []string{"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
	"--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--clearenv",
	"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "/bin/true"}

// rawBwrapTrue runs bwrap directly, as the sandbox user, running /bin/true.
func rawBwrapTrue(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	uid, gid, err := sandboxUser(o)
	if err != nil {
		return nil, err
	}
	defer reapOrphans()
	lat := make([]time.Duration, 0, n)
	for range n {
		cmd := exec.CommandContext(ctx, "bwrap", rawBwrapArgs...)
		if uid >= 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		// bwrap's namespace init is reparented to us (a subreaper); collect it
		// outside the timing so it never counts against the user's processes.
		reapOrphans()
		if err != nil {
			return nil, fmt.Errorf("bwrap: %w: %s", err, out)
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// rawBwrapClawpenFlags runs bwrap by hand with exactly the command line and
// descriptors clawpen's backend would use for a main-group run of /bin/true.
func rawBwrapClawpenFlags(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	sc, err := newScratch(o, "clawpen-bench-raw-")
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	be, err := newBwrap(o, sc, "", false, "/bin/true")
	if err != nil {
		return nil, err
	}
	defer func() { _ = be.Close() }()
	sp, err := sc.GroupSpec("main", true)
	if err != nil {
		return nil, err
	}
	defer reapOrphans()
	lat := make([]time.Duration, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cmd, done, err := be.RawCommand(sp, "/bin/true")
		if err != nil {
			return nil, fmt.Errorf("bwrap command line: %w", err)
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		done()
		reapOrphans() // outside the timing, as for the minimal row
		if err != nil {
			return nil, fmt.Errorf("bwrap: %w: %s", err, out)
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// bwrapRun starts clawpen's bwrap sandbox n times. With a command it times
// the whole run of that command; without, it runs the agent and times the
// start to its first output byte.
// bwrapMode says how bwrapRun's backend is made.
type bwrapMode int

const (
	bwrapPlain    bwrapMode = 0
	bwrapPinned   bwrapMode = 1 << iota // every bind source pinned first, as a root host does
	bwrapBaseline                       // bwrap.NewBaseline: no cgroup, seccomp filter or fresh keyring
)

func bwrapRun(ctx context.Context, o Options, n int, mode bwrapMode, command ...string) ([]time.Duration, error) {
	sc, err := newScratch(o, "clawpen-bench-sandbox-")
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	pinDir := ""
	if mode&bwrapPinned != 0 {
		pinDir = sc.Path("pins")
	}
	be, err := newBwrap(o, sc, pinDir, mode&bwrapBaseline != 0, command...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = be.Close() }()
	sp, err := sc.GroupSpec("main", true)
	if err != nil {
		return nil, err
	}
	return timeRuns(ctx, n, len(command) == 0, sp, be.Run)
}

// timeRuns times n runs of spec: to the first stdout byte when ready, else
// to the run's end (which must exit 0).
func timeRuns(ctx context.Context, n int, ready bool, sp sandbox.Spec, run func(context.Context, sandbox.Spec) (sandbox.Result, error)) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		fb := &firstByte{}
		sp.Stdout = fb
		if ready {
			sp.Stdin = []byte("{}") // not a valid job: the agent says ready, refuses it and exits
		}
		start := time.Now()
		res, err := run(ctx, sp)
		end := time.Now()
		if err != nil {
			return nil, fmt.Errorf("sandbox run: %w", err)
		}
		if !ready {
			if res.ExitCode != 0 {
				return nil, fmt.Errorf("sandbox exited %d: %s", res.ExitCode, res.Stderr)
			}
			lat = append(lat, end.Sub(start))
			continue
		}
		at := fb.first()
		if at.IsZero() {
			return nil, fmt.Errorf("the agent wrote nothing (exit %d): %s", res.ExitCode, res.Stderr)
		}
		lat = append(lat, at.Sub(start))
	}
	return lat, nil
}

// firstByte notes when the first output byte arrived.
type firstByte struct {
	mu sync.Mutex
	at time.Time
}

func (f *firstByte) Write(p []byte) (int, error) {
	now := time.Now()
	f.mu.Lock()
	if f.at.IsZero() {
		f.at = now
	}
	f.mu.Unlock()
	return len(p), nil
}

func (f *firstByte) first() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

// dockerUnavailable says why the Docker rows cannot run ("" when they can).
func dockerUnavailable(ctx context.Context, image string) string {
	if _, err := exec.LookPath("docker"); err != nil {
		return "no docker CLI in $PATH"
	}
	cli, err := dockerClient(ctx)
	if err != nil {
		return err.Error()
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Sprintf("image %s not found: make image", image)
		}
		return fmt.Sprintf("inspect image %s: %v", image, err)
	}
	return ""
}

// dockerClient connects to the engine from the environment, as clawpen does.
func dockerClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	return cli, nil
}

// benchLabel marks the bench's own containers.
const benchLabel = "clawpen.bench"

// dockerCLIRun is `docker run --rm` of /bin/true in the image, without network.
func dockerCLIRun(ctx context.Context, image string, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "--label", benchLabel+"=1",
			"--entrypoint", "/bin/true", image).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("docker run: %w: %s", err, out)
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// dockerClientRun is the Go client's bare lifecycle of /bin/true: create,
// start, wait, remove.
func dockerClientRun(ctx context.Context, image string, n int) ([]time.Duration, error) {
	cli, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := clientLifecycle(ctx, cli, image); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

func clientLifecycle(ctx context.Context, cli *client.Client, image string) error {
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/true"}, Labels: map[string]string{benchLabel: "1"}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	defer func() {
		_, _ = cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, client.ContainerRemoveOptions{Force: true})
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := cli.ContainerWait(wctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("/bin/true exited %d in the container", r.StatusCode)
		}
	case err := <-wait.Error:
		return fmt.Errorf("wait for container: %w", err)
	}
	if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// dockerAgentReady is clawpen's Docker backend from Run to the agent's first
// output byte; on a root host with idmapped pins as `clawpen serve` makes.
func dockerAgentReady(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	sc, err := newScratch(o, "clawpen-bench-docker-")
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	if sc.UID < 0 && os.Geteuid() != sandbox.UID {
		return nil, errors.New("the Docker sandbox writes as uid 1000: run as root or as uid 1000")
	}
	dc := docker.Config{Image: o.Image, Instance: fmt.Sprintf("clawpen-bench-%d", os.Getpid())}
	if sc.UID >= 0 {
		dc.PinDir, dc.DiskUID, dc.DiskGID = sc.Path("pins"), sc.UID, sc.GID
	}
	be, err := docker.New(ctx, dc)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	defer be.Close()
	sp, err := sc.GroupSpec("main", true)
	if err != nil {
		return nil, err
	}
	return timeRuns(ctx, n, true, sp, be.Run)
}

// gvisorUnavailable says why the gVisor rows cannot run ("" when they can).
func gvisorUnavailable(ctx context.Context) string {
	if os.Geteuid() != 0 {
		return "runsc needs root"
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		return "no runsc in $PATH (apt-get install runsc)"
	}
	return ""
}

// gvisorAgentReady starts clawpen's gVisor sandbox n times, as a root host
// does, until the agent's ready line.
func gvisorAgentReady(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	sc, err := newScratch(o, "clawpen-bench-gvisor-")
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	if sc.UID < 0 {
		return nil, errors.New("gVisor needs the dedicated sandbox user")
	}
	be, err := gvisor.New(ctx, gvisor.Config{AgentBin: o.AgentBin, StateDir: sc.Path("gvisor"), PinDir: sc.Path("gvisor", "pins"),
		DiskUID: sc.UID, DiskGID: sc.GID, Prefix: fmt.Sprintf("clawpen-bench-%d-gvisor", os.Getpid())})
	if err != nil {
		return nil, fmt.Errorf("gvisor backend: %w", err)
	}
	defer be.Close()
	sp, err := sc.GroupSpec("main", true)
	if err != nil {
		return nil, err
	}
	return timeRuns(ctx, n, true, sp, be.Run)
}
