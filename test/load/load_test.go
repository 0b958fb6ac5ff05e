package load

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/test/harness"
)

// size is one scale of the test.
type size struct {
	Name           string
	Groups         int
	Messages       int
	Rate           float64 // steady inbound messages per second
	BurstEvery     int     // steady messages between two bursts
	BurstSize      int     // messages of one burst, into one group
	TriggerPercent int
	Hangs, Garbage int           // triggered messages whose sandbox hangs / prints garbage
	Bound          time.Duration // for each wait until the host is idle
}

var (
	ciSize = size{Name: "ci", Groups: 40, Messages: 2000, Rate: 60, BurstEvery: 150, BurstSize: 60,
		TriggerPercent: 20, Hangs: 4, Garbage: 6, Bound: 3 * time.Minute}
	fullSize = size{Name: "full", Groups: 200, Messages: 20000, Rate: 200, BurstEvery: 400, BurstSize: 100,
		TriggerPercent: 20, Hangs: 10, Garbage: 30, Bound: 10 * time.Minute}
)

// The host's settings under load: a short wall time so hanging sandboxes
// are cut quickly, and short retry backoffs.
const (
	agentTimeout  = "5s"
	hangFor       = "8s" // longer than agentTimeout
	maxConcurrent = "4"
	// fdSlack is how many more descriptors the host may hold after the last
	// load phase than before it: pooled connections and database readers.
	fdSlack = 24
)

func sizeFromEnv(t *testing.T) size {
	s := ciSize
	if os.Getenv("CLAWPEN_LOAD_FULL") != "" {
		s = fullSize
	}
	atoi := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, name)
			*into = n
		}
	}
	atoi("CLAWPEN_LOAD_GROUPS", &s.Groups)
	atoi("CLAWPEN_LOAD_MESSAGES", &s.Messages)
	return s
}

// msg is one planned inbound message. Its marker is unique and fixed-width,
// so no marker is a substring of another.
type msg struct {
	N         int
	Group     int
	Marker    string
	Text      string
	Triggered bool
	Kind      string // "", "hang", "garbage"
	Burst     bool   // pushed with the ones before it, without pause
	Pushed    time.Time
	UpdateID  int64 // the fake Telegram's update carrying it
}

func chatOf(g int) int64    { return -1009000000000 - int64(g) }
func folderOf(g int) string { return fmt.Sprintf("load%04d", g) }
func markerOf(g, n int) string {
	return fmt.Sprintf("mk%04dx%06d", g, n)
}

// plan makes the messages: a steady stream over random groups and, every
// BurstEvery messages, a burst of BurstSize into one group. A fraction is
// triggered; some triggered ones hang their sandbox or make it print garbage.
func plan(s size, rng *rand.Rand) []*msg {
	var out []*msg
	add := func(g int, burst bool) {
		n := len(out)
		m := &msg{N: n, Group: g, Marker: markerOf(g, n), Burst: burst}
		m.Triggered = rng.IntN(100) < s.TriggerPercent
		out = append(out, m)
	}
	since := 0
	for len(out) < s.Messages {
		if since >= s.BurstEvery {
			hot := rng.IntN(s.Groups)
			for k := 0; k < s.BurstSize && len(out) < s.Messages; k++ {
				add(hot, k > 0)
			}
			since = 0
			continue
		}
		add(rng.IntN(s.Groups), false)
		since++
	}
	var triggered []*msg
	for _, m := range out {
		if m.Triggered {
			triggered = append(triggered, m)
		}
	}
	rng.Shuffle(len(triggered), func(i, j int) { triggered[i], triggered[j] = triggered[j], triggered[i] })
	for i, m := range triggered {
		switch {
		case i < s.Hangs:
			m.Kind = "hang"
		case i < s.Hangs+s.Garbage:
			m.Kind = "garbage"
		}
	}
	for _, m := range out {
		switch {
		case m.Kind == "hang":
			m.Text = fmt.Sprintf("@Andy %s this one hangs SLEEP %s", m.Marker, hangFor)
		case m.Kind == "garbage":
			// Junk straight onto the agent's stdout, the protocol channel. On
			// bwrap that pipe is the root host's and the sandbox user cannot
			// open it (EACCES); then the tool kills the agent mid-run instead,
			// which leaves the host with a truncated event stream.
			m.Text = fmt.Sprintf(`@Andy %s this one prints garbage TOOL bash {"command":"echo LOAD-GARBAGE not an event > /proc/$PPID/fd/1 || kill -9 $PPID"}`, m.Marker)
		case m.Triggered:
			m.Text = fmt.Sprintf("@Andy %s please answer", m.Marker)
		default:
			m.Text = fmt.Sprintf("note %s for the record", m.Marker)
		}
	}
	return out
}

// run is the state of one load test.
type run struct {
	t           *testing.T
	metricsAddr string // the host's metrics: which sandboxes wait and which run
	h           *harness.Host
	size        size
	msgs        []*msg
	seed        uint64

	pid      atomic.Int64 // of the current serve process, for the sampler
	crashes  []time.Time
	orphans  []procID // sandboxes that outlived their host
	restarts int

	mu           sync.Mutex
	peakRSSKiB   int
	peakThreads  int
	peakSandbox  int
	faultCounts  map[string]int
	pauseFaults  atomic.Bool
	sandboxSeen  int // distinct sandbox processes seen by the sampler
	seenSandboxs map[pkey]bool
	zombieSeen   map[pkey]procID // host children that exited and were not reaped
}

type pkey struct {
	pid   int
	start uint64
}

func TestLoadAndFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the load test takes about a minute")
	}
	s := sizeFromEnv(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CLAWPEN_LOAD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CLAWPEN_LOAD_SEED")
		seed = n
	}
	t.Logf("size %s: %d groups, %d messages, seed %d (CLAWPEN_LOAD_SEED to repeat)", s.Name, s.Groups, s.Messages, seed)
	began := time.Now()

	debugAddr, err := freeLoopbackAddr()
	require.NoError(t, err)
	metricsAddr, err := freeLoopbackAddr()
	require.NoError(t, err)
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{
		"CLAWPEN_DEBUG_ADDR":     debugAddr,   // goroutine counts, and profiles on request
		"CLAWPEN_METRICS_ADDR":   metricsAddr, // which sandboxes wait (warm) and which run
		"CLAWPEN_AGENT_TIMEOUT":  agentTimeout,
		"CLAWPEN_MAX_CONCURRENT": maxConcurrent,
		"CLAWPEN_RETRY_BACKOFF":  "200ms,400ms",
		"CLAWPEN_DEBUG":          "", // info level: debug logs of 20,000 messages only slow the host
	}})
	r := &run{t: t, h: h, size: s, seed: seed, metricsAddr: metricsAddr, msgs: plan(s, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))),
		faultCounts: map[string]int{}, seenSandboxs: map[pkey]bool{}, zombieSeen: map[pkey]procID{}}
	r.pid.Store(int64(h.PID()))

	r.register()
	ctx, stop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { r.sample(ctx) })
	bg.Go(func() { r.injectFaults(ctx) })

	// Phase 1 and 2: load, with SIGKILL at a quarter and at half of the
	// messages; messages keep arriving while the host is down.
	n := len(r.msgs)
	crashAt := map[int]bool{n / 4: true, n / 2: true}
	down := min(max(20, int(r.size.Rate)), n/20) // about a second of messages while down
	restartAt := -1
	baselineAt := n/2 + down + n/10
	var before hostStats
	zombiesBefore := 0
	// CLAWPEN_LOAD_PROFILE=dir: a CPU profile and goroutine dumps of the
	// host in the middle of the last phase.
	profileAt, profileDir := -1, os.Getenv("CLAWPEN_LOAD_PROFILE")
	if profileDir != "" {
		profileAt = baselineAt + (n-baselineAt)/4
	}
	// A backup in the middle of the last phase, while the host stores and
	// answers (`clawpen backup`, SQLite's online backup).
	backupAt := baselineAt + (n-baselineAt)/2
	var bk backupTaken
	pushStart := time.Now()
	for i, m := range r.msgs {
		if i == backupAt {
			bg.Go(func() { bk = r.backup() })
		}
		if crashAt[i] {
			r.crash()
			restartAt = i + down
		}
		if i == restartAt {
			r.restart()
		}
		if i == baselineAt {
			// Phase 3 runs on the host as it is now: measure it idle first.
			r.waitIdle("before the last phase")
			var err error
			before, err = statsOf(h.PID())
			require.NoError(t, err)
			// Settled the same way as the reading after the last phase,
			// on the same process (the one started after the last crash).
			before.Goroutines, err = settledGoroutines(ctx, debugAddr, 0, 30*time.Second)
			require.NoError(t, err)
			_, zs := zombies(descendants(h.PID()))
			zombiesBefore = len(zs)
		}
		if i == profileAt {
			bg.Go(func() {
				if err := profileMidLoad(ctx, debugAddr, profileDir, 10); err != nil {
					t.Logf("mid-load profile: %v", err)
					return
				}
				if dump, err := os.ReadFile(filepath.Join(profileDir, "goroutines-start.txt")); err == nil {
					t.Logf("mid-load goroutines (biggest stacks, innermost clawpen frame):\n%s", goroutineSummary(dump, 12))
				}
				t.Logf("mid-load CPU profile and goroutine dumps in %s", profileDir)
			})
		}
		if !m.Burst {
			time.Sleep(time.Duration(float64(time.Second) / r.size.Rate))
		}
		r.push(m)
	}
	pushDur := time.Since(pushStart)
	r.pauseFaults.Store(true)
	r.waitIdle("after the last phase")
	after, err := statsOf(h.PID())
	require.NoError(t, err)
	after.Goroutines, err = settledGoroutines(ctx, debugAddr, before.Goroutines+goroutineSlack, 30*time.Second)
	require.NoError(t, err)
	if after.FDs > before.FDs+fdSlack {
		// Pooled connections close on their own idle timers: read again, settled.
		time.Sleep(5 * time.Second)
		if again, err := statsOf(h.PID()); err == nil {
			after.FDs = again.FDs
		}
	}
	stop()
	bg.Wait()

	// Stop the host; its sandboxes (none should run now) must go with it.
	last := descendants(h.PID())
	_, zombiesLeft := zombies(last)
	for _, z := range zombiesLeft {
		t.Logf("zombie child of the idle host: pid %d (%s)", z.pid, z.comm)
	}
	h.Stop()
	r.saveHostLog()
	r.checkGone(last, "stopped host")
	r.checkBackup(bk)

	res := r.analyze()
	res.before, res.after, res.pushDur, res.total = before, after, pushDur, time.Since(began)
	res.zombiesBefore, res.zombiesLeft = zombiesBefore, len(zombiesLeft)
	report := r.summary(res)
	fmt.Fprintln(reportWriter(), "\nload and fault test:\n"+report)
	if p := os.Getenv("CLAWPEN_LOAD_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(report), 0o644)
	}

	// The verdicts.
	assert.Zero(t, res.lost, "messages lost from the store: %v", res.lostList)
	assert.Zero(t, res.extraStored, "stored messages that were never sent")
	assert.Zero(t, res.triggerMismatch, "messages stored with the wrong trigger decision")
	assert.Zero(t, res.unanswered, "triggered messages never answered: %v", res.unansweredList)
	assert.Zero(t, res.duplicates, "messages answered more than once: %v", res.duplicateList)
	assert.Zero(t, res.poisonEchoed, "hanging or garbage-printing runs answered as if they had worked: %v", res.poisonList)
	assert.Zero(t, res.pendingAfterCursor, "triggered messages left behind a group's cursor")
	assert.Zero(t, res.outboxLeft, "answers left in the outbox")
	assert.Empty(t, r.orphans, "sandboxes that outlived their host")
	// Leak-style: the runs of the last phase leave no unreaped process. (Each
	// start of serve leaves one today, its start-up probe's; reported, not
	// asserted, so this test measures the load, not that.)
	assert.LessOrEqual(t, res.zombiesLeft, res.zombiesBefore, "exited sandbox processes the idle host never reaped grew over the last phase")
	assert.Equal(t, 2, len(r.crashes), "the host was killed twice")
	assert.LessOrEqual(t, after.FDs, before.FDs+fdSlack, "host fds grew over the last phase (leak?): %s -> %s", before, after)
	assert.LessOrEqual(t, after.Goroutines, before.Goroutines+goroutineSlack, "host goroutines grew over the last phase (leak?): %s -> %s", before, after)
	// Memory: the Go runtime returns freed pages lazily, so only growth far
	// beyond the baseline counts.
	assert.LessOrEqual(t, after.RSSKiB, max(2*before.RSSKiB, before.RSSKiB+64<<10), "host RSS did not come back near its baseline: %s -> %s", before, after)
	if t.Failed() {
		t.Logf("host log (last run):\n%s", tail(h.Stderr.String(), 200))
	}
}

// backupTaken is a backup made under load: every update below confirmed
// had been stored when it began.
type backupTaken struct {
	path      string
	confirmed int64
	err       error
}

func (r *run) backup() backupTaken {
	b := backupTaken{path: filepath.Join(r.t.TempDir(), "backup.db"), confirmed: r.h.TG.Confirmed()}
	_, b.err = r.h.RunCLI("backup", b.path)
	return b
}

// checkBackup: the backup opens, passes the integrity check, and holds every
// message the host had stored before it began (as the store holds them now).
func (r *run) checkBackup(b backupTaken) {
	t := r.t
	require.NoError(t, b.err, "clawpen backup under load")
	ctx := context.Background()
	require.NoError(t, store.IntegrityCheck(ctx, b.path))
	live, err := store.Open(ctx, filepath.Join(r.h.Dir, "data", "clawpen.db"))
	require.NoError(t, err)
	defer live.Close()
	bs, err := store.Open(ctx, b.path)
	require.NoError(t, err)
	defer bs.Close()
	texts := func(st *store.Store, chat int64) map[string]bool {
		ms, err := st.MessagesAfter(ctx, chat, 0, 0)
		require.NoError(t, err)
		have := map[string]bool{}
		for _, m := range ms {
			have[m.Text] = true
		}
		return have
	}
	inLive, inBackup := map[int64]map[string]bool{}, map[int64]map[string]bool{}
	before, missing := 0, 0
	for _, m := range r.msgs {
		if m.UpdateID == 0 || m.UpdateID >= b.confirmed {
			continue
		}
		chat := chatOf(m.Group)
		if inLive[chat] == nil {
			inLive[chat], inBackup[chat] = texts(live, chat), texts(bs, chat)
		}
		if !inLive[chat][m.Text] {
			continue // not a message the host keeps
		}
		before++
		if !inBackup[chat][m.Text] {
			missing++
		}
	}
	assert.Zero(t, missing, "messages stored before the backup began but not in it")
	assert.Positive(t, before, "the backup began after messages were stored")
	fmt.Fprintf(reportWriter(), "backup under load: %d messages stored before it began, %d missing from it\n", before, missing)
}

func (r *run) push(m *msg) {
	from := faketg.User{ID: 50000 + int64(m.N%5), FirstName: fmt.Sprintf("member%d", m.N%5)}
	m.Pushed = time.Now()
	m.UpdateID = r.h.TG.PushMessage(chatOf(m.Group), "supergroup", "Load "+folderOf(m.Group), from, m.Text)
}

// register adds every group with the CLI, four at a time, while serve runs.
func (r *run) register() {
	r.t.Helper()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	errs := make([]error, r.size.Groups)
	for g := range r.size.Groups {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := r.h.RunCLI("groups", "add", strconv.FormatInt(chatOf(g), 10), folderOf(g), "Load "+folderOf(g))
			if err != nil {
				errs[g] = fmt.Errorf("groups add %d: %w: %s", g, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(r.t, err)
	}
}

// crash SIGKILLs the host while sandboxes run (waiting a little for one),
// and checks that none of them outlives it.
func (r *run) crash() {
	r.t.Helper()
	pid := r.h.PID()
	deadline := time.Now().Add(5 * time.Second)
	for len(descendants(pid)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	running := descendants(pid)
	r.h.Crash()
	r.saveHostLog()
	r.pid.Store(0)
	r.crashes = append(r.crashes, time.Now())
	r.t.Logf("crash %d: SIGKILL with %d sandbox processes running", len(r.crashes), len(running))
	r.checkGone(running, fmt.Sprintf("crash %d", len(r.crashes)))
}

// saveHostLog keeps the log of the serve process that just ended in
// CLAWPEN_LOAD_HOSTLOG (a directory), one file per process, for digging
// into a run afterwards; the harness keeps only the current process's log.
func (r *run) saveHostLog() {
	dir := os.Getenv("CLAWPEN_LOAD_HOSTLOG")
	if dir == "" {
		return
	}
	p := filepath.Join(dir, fmt.Sprintf("host-%d.log", r.restarts))
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(p, []byte(r.h.Stderr.String()), 0o644)
	}
	if err != nil {
		r.t.Logf("save host log: %v", err)
	}
}

func (r *run) restart() {
	r.t.Helper()
	r.h.Start()
	r.restarts++
	r.pid.Store(int64(r.h.PID()))
}

// checkGone waits (bounded) until none of ps lives; the survivors are orphans.
func (r *run) checkGone(ps []procID, when string) {
	deadline := time.Now().Add(15 * time.Second)
	for len(alive(ps)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := alive(ps); len(left) > 0 {
		for _, p := range left {
			r.t.Logf("orphan after %s: pid %d %s", when, p.pid, p.cmd)
		}
		r.orphans = append(r.orphans, left...)
	}
}

// sample records the host's peak resources and its sandboxes.
func (r *run) sample(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pid := int(r.pid.Load())
		if pid == 0 {
			continue
		}
		st, err := statsOf(pid)
		if err != nil {
			continue
		}
		ds := descendants(pid)
		r.mu.Lock()
		r.peakRSSKiB = max(r.peakRSSKiB, st.RSSKiB)
		r.peakThreads = max(r.peakThreads, st.Threads)
		r.peakSandbox = max(r.peakSandbox, len(ds))
		for _, d := range ds {
			k := pkey{d.pid, d.start}
			if strings.Contains(d.cmd, "bwrap") && !r.seenSandboxs[k] {
				r.seenSandboxs[k] = true
				r.sandboxSeen++
			}
			if d.state == "Z" {
				if _, ok := r.zombieSeen[k]; !ok {
					r.zombieSeen[k] = d
				}
			}
		}
		r.mu.Unlock()
	}
}

// injectFaults makes the fake Telegram and the fake model misbehave now and
// then: 429s, 5xx, dropped connections, model errors. Bursts are short, so
// no single answer meets the five refusals after which the host drops it.
func (r *run) injectFaults(ctx context.Context) {
	tick := time.NewTicker(700 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if r.pauseFaults.Load() || r.pid.Load() == 0 {
			continue
		}
		var kind string
		switch i % 5 {
		case 0:
			r.h.TG.FailNextSends(2, 429, 1)
			kind = "telegram: next 2 sends 429 (retry_after 1)"
		case 1:
			r.h.TG.FailNextSends(2, 502, 0)
			kind = "telegram: next 2 sends 502"
		case 2:
			r.h.TG.DropNextConnections(2)
			kind = "telegram: next 2 requests dropped"
		case 3:
			// Three in a row outlast the SDK's two retries: the run fails.
			r.h.LLM.FailNext(3, 500)
			kind = "model: next 3 requests 500"
		case 4:
			r.h.LLM.FailNext(3, 529)
			kind = "model: next 3 requests 529"
		}
		r.mu.Lock()
		r.faultCounts[kind]++
		r.mu.Unlock()
	}
}

// waitIdle waits until the host has handled everything sent so far: every
// update confirmed, no triggered message behind a cursor, the outbox empty,
// no sandbox running — twice in a row. (Whether every message was stored is
// for the verdict, not for this wait.)
func (r *run) waitIdle(when string) {
	r.t.Helper()
	r.pauseFaults.Store(true)
	defer r.pauseFaults.Store(false)
	deadline := time.Now().Add(r.size.Bound)
	ok, why := 0, ""
	for ok < 2 {
		if time.Now().After(deadline) {
			r.t.Fatalf("host not idle %s within %s: %s\nhost log:\n%s", when, r.size.Bound, why, tail(r.h.Stderr.String(), 200))
		}
		time.Sleep(300 * time.Millisecond)
		if why = r.busy(); why == "" {
			ok++
		} else {
			ok = 0
		}
	}
}

// busy says what the host still has to do, "" when nothing.
func (r *run) busy() string {
	if n := r.h.TG.Pending(); n > 0 {
		return fmt.Sprintf("%d updates not confirmed", n)
	}
	if ds, _ := zombies(descendants(r.h.PID())); len(ds) > 0 && !r.onlyWarm(ds) {
		var cmds []string
		for _, d := range ds {
			cmds = append(cmds, fmt.Sprintf("%d %q", d.pid, d.cmd))
		}
		return fmt.Sprintf("%d sandbox processes running: %s", len(ds), strings.Join(cmds, "; "))
	}
	ctx := context.Background()
	st := r.h.Store()
	defer st.Close()
	out, err := st.PendingOutbox(ctx)
	if err != nil {
		return err.Error()
	}
	if len(out) > 0 {
		return fmt.Sprintf("%d answers in the outbox", len(out))
	}
	for g := range r.size.Groups {
		cur, err := st.Cursor(ctx, folderOf(g))
		if err != nil {
			return err.Error()
		}
		ms, err := st.MessagesAfter(ctx, chatOf(g), cur, 0)
		if err != nil {
			return err.Error()
		}
		for _, m := range ms {
			if m.Triggered {
				return fmt.Sprintf("group %s has triggered messages after its cursor", folderOf(g))
			}
		}
	}
	return ""
}

// warmMax is CLAWPEN_WARM's default, which the load host runs with.
const warmMax = 3

// onlyWarm reports whether the sandbox processes ps are warm sandboxes
// waiting for their job, and nothing else: the host's metrics say none runs
// and as many wait as there are agents, at most CLAWPEN_WARM.
func (r *run) onlyWarm(ps []procID) bool {
	body, err := debugGet(context.Background(), r.metricsAddr, "/metrics", 5*time.Second)
	if err != nil {
		return false
	}
	gauge := func(name string) float64 {
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil {
					return f
				}
			}
		}
		return -1
	}
	agents := 0
	for _, p := range ps {
		if p.comm == "clawpen-agent" {
			agents++
		}
	}
	warm := gauge("clawpen_sandboxes_warm")
	return gauge("clawpen_sandboxes_running") == 0 && warm == float64(agents) && agents <= warmMax
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// reportWriter is where the summary goes so that `make load` shows it: go
// test shows a passing package's output only with -v, so without it the
// table goes to the go command's own stdout (as the escape suite does).
func reportWriter() io.Writer {
	if testing.Verbose() {
		return os.Stdout
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return os.Stdout
	}
	// A `go test >file` keeps writing at its own offset, over what we
	// appended: a blank line of padding takes its "ok" line instead.
	fmt.Fprintln(f, strings.Repeat(" ", 120))
	return f // closed at exit
}
