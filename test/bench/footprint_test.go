package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/store"
)

// hostOnce builds clawpen (with cgo, for SQLite) beside clawpen-agent, only
// for the benchmarks that need it.
var hostOnce = sync.OnceValues(func() (string, error) {
	out := filepath.Join(binDir, "clawpen")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/clawpen")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build clawpen: %w\n%s", err, msg)
	}
	return out, nil
})

func hostBin(b *testing.B) string {
	b.Helper()
	p, err := hostOnce()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkBinarySize reports the sizes of clawpen and clawpen-agent as
// built by `go build` (no stripping flags).
func BenchmarkBinarySize(b *testing.B) {
	host := hostBin(b)
	var hostMB, agentMB float64
	for b.Loop() {
		hostMB, agentMB = fileMB(b, host), fileMB(b, agentBin)
	}
	b.ReportMetric(hostMB, "MB-clawpen")
	b.ReportMetric(agentMB, "MB-clawpen-agent")
}

func fileMB(b *testing.B, p string) float64 {
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	return float64(fi.Size()) / (1 << 20)
}

// serveEnv is one host's directories and fakes; groups are registered in its
// database before serve starts, as `clawpen groups add` would.
type serveEnv struct {
	bin string
	dir string
	tg  *faketg.Server
	env []string
}

func newServeEnv(b *testing.B, groups int) *serveEnv {
	b.Helper()
	dir := b.TempDir()
	_ = os.Chmod(dir, 0o755)
	tg := faketg.New()
	b.Cleanup(tg.Close)
	llm := fakellm.New()
	b.Cleanup(llm.Close)
	data := filepath.Join(dir, "data")
	if groups > 0 {
		ctx := context.Background()
		st, err := store.Open(ctx, filepath.Join(data, "clawpen.db"))
		if err != nil {
			b.Fatal(err)
		}
		registerGroups(ctx, b, st, groups)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return &serveEnv{bin: hostBin(b), dir: dir, tg: tg, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"TELEGRAM_BOT_TOKEN=1:bench",
		"TELEGRAM_API_URL=" + tg.URL(),
		"ANTHROPIC_API_KEY=k",
		"ANTHROPIC_BASE_URL=" + llm.URL(),
		"CLAWPEN_OWNER_ID=42",
		"CLAWPEN_SANDBOX=bwrap",
		"CLAWPEN_AGENT_BIN=" + agentBin,
		"CLAWPEN_DATA_DIR=" + data,
		"CLAWPEN_GROUPS_DIR=" + filepath.Join(dir, "groups"),
	}}
}

// serveProc is one running `clawpen serve`.
type serveProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it was reaped
}

// start runs `clawpen serve` and returns it once it called getUpdates, with
// the time that took from exec.
func (e *serveEnv) start(b *testing.B) (*serveProc, time.Duration) {
	b.Helper()
	before := e.tg.Calls("getUpdates")
	cmd := exec.Command(e.bin, "serve")
	cmd.Dir = e.dir
	cmd.Env = e.env
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &serveProc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	b.Cleanup(p.stop)
	deadline := time.After(30 * time.Second)
	for e.tg.Calls("getUpdates") == before {
		select {
		case <-p.exited:
			b.Fatalf("clawpen serve exited before polling:\n%s", logs)
		case <-deadline:
			b.Fatalf("clawpen serve did not poll within 30s:\n%s", logs)
		case <-time.After(100 * time.Microsecond):
		}
	}
	return p, time.Since(begin)
}

func (p *serveProc) pid() int { return p.cmd.Process.Pid }

// stop ends serve gracefully (SIGTERM), then for good; it may be called again.
func (p *serveProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// syncBuffer collects serve's output, written from exec's copying goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rssMB is the resident set size of pid (VmRSS), in MB.
func rssMB(b *testing.B, pid int) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// settle is how long serve idles before its RSS is read: start-up garbage
// collected, the first long poll parked.
const settle = 2 * time.Second

// BenchmarkServeStartup starts the real `clawpen serve` (bwrap backend, fake
// Telegram and model) with 0, 1,000 and 10,000 registered groups, and reports
// the time from exec to its first getUpdates call and its idle RSS after.
//
//	go test -run '^$' -bench ServeStartup -benchtime 5x ./test/bench/
func BenchmarkServeStartup(b *testing.B) {
	for _, groups := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			e := newServeEnv(b, groups)
			var startups []time.Duration
			var rss []float64
			for b.Loop() {
				p, startup := e.start(b)
				startups = append(startups, startup)
				b.StopTimer()
				time.Sleep(settle)
				rss = append(rss, rssMB(b, p.pid()))
				p.stop()
				b.StartTimer()
			}
			slices.Sort(startups)
			slices.Sort(rss)
			b.ReportMetric(float64(startups[0].Microseconds())/1000, "ms-min-startup")
			b.ReportMetric(float64(startups[len(startups)/2].Microseconds())/1000, "ms-p50-startup")
			b.ReportMetric(rss[len(rss)/2], "MB-p50-idle-RSS")
		})
	}
}

// BenchmarkServeInbound pushes 10,000 untriggered group messages per
// iteration through the fake Telegram into the real `clawpen serve` with
// 1,000 registered groups, waits until serve confirmed them all, and reports
// the end-to-end rate and the RSS before and after.
//
//	go test -run '^$' -bench ServeInbound -benchtime 1x ./test/bench/
func BenchmarkServeInbound(b *testing.B) {
	const groups, batch = 1_000, 10_000
	e := newServeEnv(b, groups)
	p, _ := e.start(b)
	time.Sleep(settle)
	idle := rssMB(b, p.pid())
	ctx := context.Background()
	sent := 0
	for b.Loop() {
		var last int64
		for i := range batch {
			g := (sent + i) % groups
			last = e.tg.PushMessage(groupChat(g), "supergroup", fmt.Sprint("chat ", g),
				faketg.User{ID: memberID, FirstName: "member"}, fmt.Sprint("just chatting, message ", sent+i))
		}
		sent += batch
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := e.tg.WaitConfirmed(wctx, last+1)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	after := rssMB(b, p.pid())
	time.Sleep(settle)
	settled := rssMB(b, p.pid())
	if stored := storedMessages(ctx, b, e, groups); stored != sent {
		b.Fatalf("serve confirmed %d messages but stored %d", sent, stored)
	}
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(idle, "MB-RSS-idle")
	b.ReportMetric(after, "MB-RSS-after")
	b.ReportMetric(settled, "MB-RSS-after+2s")
}

// storedMessages counts the messages of the registered groups in serve's
// database (read beside the running host, as the CLI would).
func storedMessages(ctx context.Context, b *testing.B, e *serveEnv, groups int) int {
	b.Helper()
	st, err := store.Open(ctx, filepath.Join(e.dir, "data", "clawpen.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n := 0
	for g := range groups {
		c, err := st.CountMessages(ctx, groupChat(g))
		if err != nil {
			b.Fatal(err)
		}
		n += c
	}
	return n
}
