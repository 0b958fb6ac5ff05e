package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/retry"
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
	up := Latency("serve start-up to first getUpdates, 0 groups", startup)
	sec.Rows = append(sec.Rows, up.WithTarget(fmt.Sprintf("p50 ≤ %d ms", startupTarget.Milliseconds()), up.P50 <= ms(startupTarget)),
		Value("RSS idle, 0 groups", "MB", idle.total).WithTarget("≤ 12 MB", idle.total <= 12),
		Value("RSS idle, 0 groups: anonymous", "MB", idle.anon),
		Value("RSS idle, 0 groups: file-backed", "MB", idle.file))
	_, idle1k, err := serveIdle(ctx, o, 1_000, 1)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows, Value("RSS idle, 1,000 groups", "MB", idle1k.total).WithTarget("< 40 MB", idle1k.total < 40))

	msgs := 10_000
	if o.Quick {
		msgs = 2_000
	}
	o.progress("bench: footprint: RSS after %d messages through serve", msgs)
	in, err := serveInbound(ctx, o, 1_000, msgs, nil)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows,
		Value(fmt.Sprintf("RSS after %s messages, 1,000 groups", count(msgs)), "MB", in.rssAfter),
		Value(fmt.Sprintf("RSS %v after that, settled", settle(o)), "MB", in.rssSettled))
	sec.Notes = append(sec.Notes,
		"RSS is VmRSS of `clawpen serve` (bwrap backend, fake Telegram and model on loopback), read after it idled "+settle(o).String()+"; groups are registered in its database before it starts",
		"anonymous is what serve holds (Go heap, stacks, SQLite's C heap); file-backed is mapped files, its own program first: clean page cache the kernel can drop at any time",
		"start-up is from exec to its first getUpdates call")
	return sec
}

// startupTarget is issue 26's: nothing on the start path that can run after
// the first getUpdates.
const startupTarget = 20 * time.Millisecond

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
func serveIdle(ctx context.Context, o Options, groups, starts int) ([]time.Duration, rss, error) {
	var idle rss
	h, err := newServeHost(ctx, o, groups, nil)
	if err != nil {
		return nil, idle, err
	}
	defer h.Close()
	var startup []time.Duration
	for i := range starts {
		p, d, err := h.start(ctx)
		if err != nil {
			return nil, idle, err
		}
		startup = append(startup, d)
		if i == 0 {
			if err := retry.Sleep(ctx, settle(o)); err != nil {
				p.stop()
				return nil, idle, err
			}
			idle, err = readRSS(p.pid())
		}
		p.stop()
		if err != nil {
			return nil, idle, err
		}
	}
	return startup, idle, nil
}

// inboundResult is one serve-path inbound run.
type inboundResult struct {
	rate                          float64 // messages confirmed and stored per second
	rssIdle, rssAfter, rssSettled float64
	cpuPerMsg                     time.Duration // serve's CPU time (user + system) per message
}

// serveInbound pushes msgs untriggered group messages over `groups`
// registered groups through the fake Telegram into a running serve, waits
// until serve confirmed them all, and checks they were stored; extra
// environment wins over the bench's.
func serveInbound(ctx context.Context, o Options, groups, msgs int, extra map[string]string) (inboundResult, error) {
	var res inboundResult
	h, err := newServeHost(ctx, o, groups, extra)
	if err != nil {
		return res, err
	}
	defer h.Close()
	p, _, err := h.start(ctx)
	if err != nil {
		return res, err
	}
	defer p.stop()
	if err := retry.Sleep(ctx, settle(o)); err != nil {
		return res, err
	}
	if res.rssIdle, err = rssTotal(p.pid()); err != nil {
		return res, err
	}
	cpu0, err := cpuTime(p.pid())
	if err != nil {
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
	cpu1, err := cpuTime(p.pid())
	if err != nil {
		return res, err
	}
	res.cpuPerMsg = (cpu1 - cpu0) / time.Duration(msgs)
	if res.rssAfter, err = rssTotal(p.pid()); err != nil {
		return res, err
	}
	if err := retry.Sleep(ctx, settle(o)); err != nil {
		return res, err
	}
	if res.rssSettled, err = rssTotal(p.pid()); err != nil {
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
// the defaults. Serve runs from o.HostBin itself: clawpen-bench is another
// program, so no page of serve's program file is the bench's too (serve
// pages its idle program out, and the kernel keeps pages another process
// maps).
func newServeHost(ctx context.Context, o Options, groups int, extra map[string]string, fakeOpts ...faketg.Option) (*serveHost, error) {
	s, err := newScratch(o, "clawpen-bench-serve-")
	if err != nil {
		return nil, err
	}
	h := &serveHost{s: s, f: startFakes(fakeOpts...), bin: o.HostBin}
	if groups > 0 {
		if err := withStore(ctx, s.DataDir(), func(st *store.Store) error { return registerGroups(ctx, st, groups) }); err != nil {
			h.Close()
			return nil, err
		}
	}
	h.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.Path("home")}
	for k, v := range serveEnv(o, s, h.f, extra) {
		h.env = append(h.env, k+"="+v)
	}
	return h, nil
}

// serveEnv is the configuration of a bench's `clawpen serve`: the bwrap
// backend with the agent and sandbox user given, the fakes, the scratch's
// directories; extra wins over these.
func serveEnv(o Options, s *scratch, f *fakes, extra map[string]string) map[string]string {
	env := map[string]string{
		"TELEGRAM_BOT_TOKEN":      "1:bench",
		"TELEGRAM_API_URL":        f.TG.URL(),
		"ANTHROPIC_API_KEY":       "k",
		"ANTHROPIC_BASE_URL":      f.LLM.URL(),
		"CLAWPEN_MODEL":           "claude-bench",
		"CLAWPEN_OWNER_ID":        strconv.FormatInt(ownerID, 10),
		"CLAWPEN_SANDBOX":         "bwrap",
		"CLAWPEN_SANDBOX_USER":    cmp.Or(o.SandboxUser, config.DefaultSandboxUser),
		"CLAWPEN_AGENT_BIN":       o.AgentBin,
		"CLAWPEN_DATA_DIR":        s.DataDir(),
		"CLAWPEN_GROUPS_DIR":      s.GroupsDir(),
		"CLAWPEN_MOUNT_ALLOWLIST": s.Path("home", ".config", "clawpen", "mount-allowlist.json"), // none: not the operator's
		"CLAWPEN_DEBUG":           "",
		// Each section measures what it names; the warm section sets it.
		"CLAWPEN_WARM": "0",
	}
	maps.Copy(env, extra)
	return env
}

// Close stops the fakes and removes the directories.
func (h *serveHost) Close() {
	h.f.Close()
	h.s.Close()
}

// withStore opens the database under dataDir for fn (beside a running
// serve, as the CLI would).
func withStore(ctx context.Context, dataDir string, fn func(st *store.Store) error) error {
	st, err := store.Open(ctx, filepath.Join(dataDir, "clawpen.db"))
	if err != nil {
		return err
	}
	return errors.Join(fn(st), st.Close())
}

// storedMessages counts the messages of the first n registered groups.
func (h *serveHost) storedMessages(ctx context.Context, groups int) (int, error) {
	n := 0
	err := withStore(ctx, h.s.DataDir(), func(st *store.Store) error {
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

// rss is a process's resident set size (VmRSS) and its two parts that
// matter here (RssAnon, RssFile; RssShmem is none of serve's), in MB.
type rss struct{ total, anon, file float64 }

// readRSS reads pid's resident set from /proc/<pid>/status.
func readRSS(pid int) (rss, error) {
	var r rss
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return r, fmt.Errorf("rss: %w", err)
	}
	defer f.Close()
	fields := map[string]*float64{"VmRSS:": &r.total, "RssAnon:": &r.anon, "RssFile:": &r.file}
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), "\t")
		dst, ok := fields[name]
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return r, fmt.Errorf("rss: %s %q: %w", name, v, err)
		}
		*dst = kb / 1024
		seen++
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("rss: %w", err)
	}
	if seen != len(fields) {
		return r, fmt.Errorf("rss: /proc/%d/status lacks VmRSS, RssAnon or RssFile", pid)
	}
	return r, nil
}

// rssTotal is pid's VmRSS in MB.
func rssTotal(pid int) (float64, error) {
	r, err := readRSS(pid)
	return r.total, err
}
