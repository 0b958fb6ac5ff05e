// Package bench measures sandbox start-up and host overhead side by side:
//
//	go test -run '^$' -bench 'Fork|Bwrap|Sandbox|HostUpdate' -benchtime 200x ./test/bench/
//	go test -run '^$' -bench '^BenchmarkInbound$' ./test/bench/
//	go test -run '^$' -bench 'BinarySize|ServeStartup' -benchtime 5x ./test/bench/
//	go test -run '^$' -bench ServeInbound -benchtime 1x ./test/bench/
//
// (ServeStartup idles 2 s per iteration and ServeInbound pushes 10,000
// messages per iteration, so they take small counts.)
//
// Every figure comes from real processes: fork-exec, raw bwrap, clawpen's bwrap
// sandbox running the real clawpen-agent, and the real router, queue and runner.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/queue"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
)

var (
	agentBin string
	binDir   string // holds clawpen-agent, and clawpen once hostBin built it
	quiet    = slog.New(slog.DiscardHandler)
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	// Orphaned sandbox inits come to us, not to a slow PID 1 (see reapOrphans).
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	dir, err := os.MkdirTemp("", "clawpen-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	binDir = dir
	agentBin = filepath.Join(dir, "clawpen-agent")
	cmd := exec.Command("go", "build", "-o", agentBin, "./cmd/clawpen-agent")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// workspace makes the directories one group's sandbox binds, owned by the sandbox user.
func workspace(b *testing.B) (root string, uid, gid int) {
	b.Helper()
	root, err := os.MkdirTemp("", "clawpen-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	_ = os.Chmod(root, 0o755)
	uid, gid = -1, -1
	if os.Geteuid() == 0 {
		uid, gid = sandbox.UID, sandbox.GID
	}
	for _, d := range []string{"groups/main", "groups/global", "data/sessions/main", "data/sockets"} {
		p := filepath.Join(root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		if uid >= 0 {
			_ = os.Chown(p, uid, gid)
		}
	}
	return root, uid, gid
}

func spec(root string) sandbox.Spec {
	return sandbox.Spec{
		InvocationID: "bench", Group: "main", IsMain: true,
		GroupDir: filepath.Join(root, "groups/main"), GlobalDir: filepath.Join(root, "groups/global"), GlobalWritable: true,
		SessionDir: filepath.Join(root, "data/sessions/main"),
		Env:        map[string]string{"LANG": "C.UTF-8"}, Limits: sandbox.DefaultLimits,
	}
}

// BenchmarkForkExecTrue is the floor: starting any process at all.
func BenchmarkForkExecTrue(b *testing.B) {
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	report(b, lat, "true")
}

// BenchmarkRawBwrapTrue runs bwrap itself, as the sandbox user, with
// clawpen's namespace and capability flags and a minimal view, running /bin/true.
func BenchmarkRawBwrapTrue(b *testing.B) {
	_, uid, gid := workspace(b)
	args := []string{"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--uid", "1000", "--gid", "1000", "--clearenv",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "/bin/true"}
	var lat []time.Duration
	for b.Loop() {
		cmd := exec.Command("bwrap", args...)
		if uid >= 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}
		}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
		lat = append(lat, time.Since(start))
		reapOrphans()
	}
	report(b, lat, "true")
}

// reapOrphans collects bwrap's namespace inits, which bwrap leaves to be
// reparented (to this process, a subreaper). Nothing else runs meanwhile.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// BenchmarkSandboxTrue is clawpen's whole bwrap sandbox (limits, fds,
// synthesised /etc, binds) running /bin/true instead of the agent.
func BenchmarkSandboxTrue(b *testing.B) {
	root, uid, gid := workspace(b)
	be, err := bwrap.New(bwrap.Config{AgentBin: agentBin, RunAsUID: uid, RunAsGID: gid, Command: []string{"/bin/true"}})
	if err != nil {
		b.Fatal(err)
	}
	sp := spec(root)
	sp.Stdout = io.Discard
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := be.Run(context.Background(), sp)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
		lat = append(lat, time.Since(start))
	}
	report(b, lat, "true")
}

// firstByte records when the agent's first output byte arrived.
type firstByte struct {
	once sync.Once
	at   time.Time
}

func (f *firstByte) Write(p []byte) (int, error) {
	f.once.Do(func() { f.at = time.Now() })
	return len(p), nil
}

// BenchmarkSandboxAgentReady is clawpen's sandbox start to the agent's first
// output line ("ready"), through the full backend (limits, fds, namespaces).
func BenchmarkSandboxAgentReady(b *testing.B) { benchAgentReady(b, false) }

// BenchmarkSandboxAgentReadyPinned is the same as a root host runs it: every
// bind source pinned under a staging directory first.
func BenchmarkSandboxAgentReadyPinned(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pinning needs root")
	}
	benchAgentReady(b, true)
}

func benchAgentReady(b *testing.B, pinned bool) {
	root, uid, gid := workspace(b)
	cfg := bwrap.Config{AgentBin: agentBin, RunAsUID: uid, RunAsGID: gid}
	if pinned {
		cfg.PinDir = filepath.Join(root, "pins")
	}
	be, err := bwrap.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		fb := &firstByte{}
		sp := spec(root)
		sp.Stdout = fb
		sp.Stdin = []byte("{}") // invalid job: the agent says ready, then refuses it and exits
		start := time.Now()
		if _, err := be.Run(context.Background(), sp); err != nil {
			b.Fatal(err)
		}
		if fb.at.IsZero() {
			b.Fatal("agent printed nothing")
		}
		lat = append(lat, fb.at.Sub(start))
	}
	report(b, lat, "ready")
}

// timed wraps the real backend and records when the runner asked for a sandbox.
type timed struct {
	runner.Sandbox
	started chan time.Time
}

func (t timed) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	t.started <- time.Now()
	return t.Sandbox.Run(ctx, sp)
}

// BenchmarkHostUpdateToSandboxStart is the host's own handling time: from a
// Telegram message handed to the router to the sandbox start call (store,
// trigger, queue, socket and job preparation), with the real bwrap sandbox
// then running the real agent against the fake model.
func BenchmarkHostUpdateToSandboxStart(b *testing.B) {
	root, uid, gid := workspace(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tg := faketg.New()
	defer tg.Close()
	llm := fakellm.New()
	defer llm.Close()
	tc, err := telegram.New(ctx, telegram.Config{Token: "1:x", APIURL: tg.URL(), Pacing: telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}})
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(root, "data", "clawpen.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	be, err := bwrap.New(bwrap.Config{AgentBin: agentBin, RunAsUID: uid, RunAsGID: gid})
	if err != nil {
		b.Fatal(err)
	}
	sb := timed{Sandbox: be, started: make(chan time.Time, 1)}
	run := runner.New(runner.Config{
		GroupsDir: filepath.Join(root, "groups"), DataDir: filepath.Join(root, "data"), RunAsUID: uid, RunAsGID: gid,
		AssistantName: "Andy", Provider: "anthropic", Model: "m", Limits: sandbox.DefaultLimits, Logger: quiet,
		Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL(), APIKey: "k"}},
	}, sb)
	var q *queue.Queue
	rt, err := router.New(ctx, router.Config{Store: st, Messenger: tc, Agents: run, Kick: func(g string) { q.Kick(g) },
		OwnerID: 42, AssistantName: "Andy", GroupsDir: filepath.Join(root, "groups"), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	q = queue.New(ctx, queue.Config{MaxConcurrent: 1, Pending: rt.Pending})
	go rt.Deliver(ctx)

	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := rt.Handle(ctx, router.Inbound{ChatID: 42, ChatType: "private", MessageID: int64(i), SenderID: 42, SenderName: "o", Text: fmt.Sprint("m", i), Time: start}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-sb.started).Sub(start))
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		if _, err := tg.WaitSent(wctx, 42, i); err != nil {
			b.Fatalf("answer %d: %v", i, err)
		}
		wcancel()
	}
	report(b, lat, "handle-to-start")
}

func report(b *testing.B, lat []time.Duration, what string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(lat[0].Microseconds()), "µs-min-"+what)
	b.ReportMetric(p(0.5), "µs-p50-"+what)
	b.ReportMetric(p(0.95), "µs-p95-"+what)
	b.ReportMetric(p(0.99), "µs-p99-"+what)
}
