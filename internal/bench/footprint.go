package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/store"
)

// footprint is the host's memory, binary sizes and start-up time, from the
// real `clawpen serve` against the fakes.
func footprint(ctx context.Context, o Options) Section {
	sec := Section{Name: "footprint"}
	for _, b := range []struct{ name, path string }{{"binary size, clawpen", o.HostBin}, {"binary size, clawpen-agent", o.AgentBin}} {
		fi, err := os.Stat(b.path)
		if err != nil {
			sec.Rows = append(sec.Rows, Row{Name: b.name, Skipped: err.Error()})
			continue
		}
		sec.Rows = append(sec.Rows, Value(b.name, "MB", float64(fi.Size())/(1<<20)))
	}
	if o.HostBin == "" {
		sec.Skipped = "no clawpen binary (HostBin)"
		return sec
	}

	starts := 10
	if o.Quick {
		starts = 3
	}
	o.progress("bench: footprint: serve start-up ×%d, idle RSS with 0 and 1,000 groups", starts)
	startup, idle, err := serveIdle(ctx, o, 0, starts)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows, Latency("serve start-up to first getUpdates, 0 groups", startup))
	sec.Rows = append(sec.Rows, Value("RSS idle, 0 groups", "MB", idle).WithTarget("< 20 MB", idle < 20))
	_, idle1k, err := serveIdle(ctx, o, 1_000, 1)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows, Value("RSS idle, 1,000 groups", "MB", idle1k).WithTarget("< 40 MB", idle1k < 40))

	msgs := 10_000
	if o.Quick {
		msgs = 2_000
	}
	o.progress("bench: footprint: RSS after %d messages through serve", msgs)
	in, err := serveInbound(ctx, o, 1_000, msgs)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows,
		Value(fmt.Sprintf("RSS after %s messages, 1,000 groups", count(msgs)), "MB", in.rssAfter),
		Value(fmt.Sprintf("RSS %v after that, settled", settle(o)), "MB", in.rssSettled))
	sec.Notes = append(sec.Notes,
		"RSS is VmRSS of `clawpen serve` (bwrap backend, fake Telegram and model on loopback), read after it idled "+settle(o).String()+"; groups are registered in its database before it starts",
		"start-up is from exec to its first getUpdates call")
	return sec
}

// failed marks what is left of a section as not measured.
func failed(sec Section, err error) Section {
	if len(sec.Rows) == 0 {
		sec.Skipped = err.Error()
		return sec
	}
	sec.Notes = append(sec.Notes, "stopped early: "+err.Error())
	return sec
}

// count formats n with thousands separators (10,000).
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// settle is how long serve idles before its RSS is read: start-up garbage
// collected, the first long poll parked.
func settle(o Options) time.Duration {
	if o.Quick {
		return time.Second
	}
	return 2 * time.Second
}

// serveIdle starts serve with groups registered `starts` times, and returns
// each start-up time and the RSS after the first idled.
func serveIdle(ctx context.Context, o Options, groups, starts int) ([]time.Duration, float64, error) {
	h, err := newServeHost(ctx, o, groups, nil)
	if err != nil {
		return nil, 0, err
	}
	defer h.Close()
	var startup []time.Duration
	var rss float64
	for i := range starts {
		p, d, err := h.start(ctx)
		if err != nil {
			return nil, 0, err
		}
		startup = append(startup, d)
		if i == 0 {
			if err := sleep(ctx, settle(o)); err != nil {
				p.stop()
				return nil, 0, err
			}
			rss, err = rssMB(p.pid())
		}
		p.stop()
		if err != nil {
			return nil, 0, err
		}
	}
	return startup, rss, nil
}

// inboundResult is one serve-path inbound run.
type inboundResult struct {
	rate                          float64 // messages confirmed and stored per second
	rssIdle, rssAfter, rssSettled float64
}

// serveInbound pushes msgs untriggered group messages over `groups`
// registered groups through the fake Telegram into a running serve, waits
// until serve confirmed them all, and checks they were stored.
func serveInbound(ctx context.Context, o Options, groups, msgs int) (inboundResult, error) {
	var res inboundResult
	h, err := newServeHost(ctx, o, groups, nil)
	if err != nil {
		return res, err
	}
	defer h.Close()
	p, _, err := h.start(ctx)
	if err != nil {
		return res, err
	}
	defer p.stop()
	if err := sleep(ctx, settle(o)); err != nil {
		return res, err
	}
	if res.rssIdle, err = rssMB(p.pid()); err != nil {
		return res, err
	}
	from := faketg.User{ID: memberID, FirstName: "member"}
	begin := time.Now()
	var last int64
	for i := range msgs {
		g := i % groups
		last = h.f.TG.PushMessage(groupChat(g), "supergroup", fmt.Sprint("chat ", g), from, fmt.Sprint("just chatting, message ", i))
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err = h.f.TG.WaitConfirmed(wctx, last+1)
	cancel()
	if err != nil {
		return res, fmt.Errorf("serve inbound: %w\n%s", err, p.logs.tail())
	}
	res.rate = float64(msgs) / time.Since(begin).Seconds()
	if res.rssAfter, err = rssMB(p.pid()); err != nil {
		return res, err
	}
	if err := sleep(ctx, settle(o)); err != nil {
		return res, err
	}
	if res.rssSettled, err = rssMB(p.pid()); err != nil {
		return res, err
	}
	stored, err := h.storedMessages(ctx, groups)
	if err != nil {
		return res, err
	}
	if stored != msgs {
		return res, fmt.Errorf("serve confirmed %d messages but stored %d", msgs, stored)
	}
	return res, nil
}

// serveHost is one host's directories, fakes and environment for running
// the real `clawpen serve`.
type serveHost struct {
	s   *scratch
	f   *fakes
	bin string
	env []string
}

// newServeHost makes a host with groups registered in its database before
// serve starts (as `clawpen groups add` would); extra environment wins over
// the defaults.
func newServeHost(ctx context.Context, o Options, groups int, extra map[string]string) (*serveHost, error) {
	s, err := newScratch("clawpen-bench-serve-")
	if err != nil {
		return nil, err
	}
	h := &serveHost{s: s, f: startFakes(), bin: o.HostBin}
	if groups > 0 {
		if err := h.withStore(ctx, func(st *store.Store) error { return registerGroups(ctx, st, groups) }); err != nil {
			h.Close()
			return nil, err
		}
	}
	h.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.Path("home"),
		"TELEGRAM_BOT_TOKEN=1:bench",
		"TELEGRAM_API_URL=" + h.f.TG.URL(),
		"ANTHROPIC_API_KEY=k",
		"ANTHROPIC_BASE_URL=" + h.f.LLM.URL(),
		"CLAWPEN_MODEL=claude-bench",
		"CLAWPEN_OWNER_ID=" + strconv.FormatInt(ownerID, 10),
		"CLAWPEN_SANDBOX=bwrap",
		"CLAWPEN_AGENT_BIN=" + o.AgentBin,
		"CLAWPEN_DATA_DIR=" + s.DataDir(),
		"CLAWPEN_GROUPS_DIR=" + s.GroupsDir(),
		"CLAWPEN_DEBUG=",
	}
	for k, v := range extra {
		h.env = append(h.env, k+"="+v) // exec keeps the last of duplicate keys
	}
	return h, nil
}

// Close stops the fakes and removes the directories.
func (h *serveHost) Close() {
	h.f.Close()
	h.s.Close()
}

// withStore opens the host's database for fn (beside a running serve, as the CLI would).
func (h *serveHost) withStore(ctx context.Context, fn func(st *store.Store) error) error {
	st, err := store.Open(ctx, filepath.Join(h.s.DataDir(), "clawpen.db"))
	if err != nil {
		return err
	}
	return errors.Join(fn(st), st.Close())
}

// storedMessages counts the messages of the first n registered groups.
func (h *serveHost) storedMessages(ctx context.Context, groups int) (int, error) {
	n := 0
	err := h.withStore(ctx, func(st *store.Store) error {
		for g := range groups {
			c, err := st.CountMessages(ctx, groupChat(g))
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	return n, err
}

// serveProc is one running `clawpen serve`.
type serveProc struct {
	cmd    *exec.Cmd
	logs   *logBuffer
	exited chan struct{} // closed once it was reaped
}

// start runs `clawpen serve` and returns it once it called getUpdates, with
// the time that took from exec.
func (h *serveHost) start(ctx context.Context) (*serveProc, time.Duration, error) {
	before := h.f.TG.Calls("getUpdates")
	cmd := exec.Command(h.bin, "serve")
	cmd.Dir = h.s.Root
	cmd.Env = h.env
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, so that stopping it for good takes its sandboxes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start clawpen serve: %w", err)
	}
	p := &serveProc{cmd: cmd, logs: logs, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	for h.f.TG.Calls("getUpdates") == before {
		select {
		case <-p.exited:
			return nil, 0, fmt.Errorf("clawpen serve exited before polling:\n%s", logs.tail())
		case <-deadline.C:
			p.stop()
			return nil, 0, fmt.Errorf("clawpen serve did not poll within 30s:\n%s", logs.tail())
		case <-ctx.Done():
			p.stop()
			return nil, 0, ctx.Err()
		case <-tick.C:
		}
	}
	return p, time.Since(begin), nil
}

func (p *serveProc) pid() int { return p.cmd.Process.Pid }

// stop ends serve gracefully (SIGTERM), then for good with its process
// group; it may be called again.
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
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// logBuffer collects serve's output, written from exec's copying goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the end of the log, enough to say why serve failed.
func (l *logBuffer) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// rssMB is the resident set size of pid (VmRSS), in MB.
func rssMB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("rss: VmRSS %q: %w", v, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("rss: no VmRSS in /proc/%d/status", pid)
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
