package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/retry"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/store"
)

// inboundTarget is the target for messages stored and routed.
const inboundTarget = 2_000

// inboundThroughput is messages per second through the real router and
// store (no sandbox), through the real `clawpen serve`, and answered by
// serve with real bwrap sandboxes at several concurrency limits.
func inboundThroughput(ctx context.Context, o Options) Section {
	sec := Section{Name: "inbound throughput"}
	groups, stored, n := 1_000, 100_000, 5_000
	if o.Quick {
		stored, n = 10_000, 1_000
	}
	o.progress("bench: inbound: router with %s groups and %s stored messages", count(groups), count(stored))
	rb, err := newRouterBench(ctx, groups, stored, nil)
	if err != nil {
		return failed(sec, err)
	}
	var mixed Row
	where := fmt.Sprintf(", %s groups, %s stored", count(groups), count(stored))
	for _, k := range []struct {
		name  string
		every int
	}{{"router, untriggered", 0}, {"router, triggered (@Andy)", 1}, {"router, mixed (1 in 4 triggered)", 4}} {
		rate, lat, err := rb.measure(ctx, n, k.every)
		if err != nil {
			rb.Close()
			return failed(sec, err)
		}
		row := Value(k.name+where, "msgs/s", rate)
		if k.every == 4 {
			row = row.WithTarget("≥ 2,000 msgs/s", rate >= inboundTarget)
			mixed = Latency("router, one Handle, mixed", lat)
		}
		sec.Rows = append(sec.Rows, row)
	}
	sec.Rows = append(sec.Rows, mixed)
	sec.Notes = append(sec.Notes, fmt.Sprintf("router rows: %s messages each through router.Handle and a real SQLite store (setup %v); the router is not run, so a triggered message only marks its group's turn and no sandbox runs",
		count(n), rb.setup.Round(time.Millisecond)))
	rb.Close()

	if o.HostBin == "" || o.AgentBin == "" {
		sec.Notes = append(sec.Notes, "serve rows skipped: HostBin or AgentBin not set")
		return sec
	}
	msgs := 10_000
	if o.Quick {
		msgs = 2_000
	}
	o.progress("bench: inbound: %s messages through serve", count(msgs))
	in, err := serveInbound(ctx, o, groups, msgs, nil)
	if err != nil {
		return failed(sec, err)
	}
	sec.Rows = append(sec.Rows, Value(fmt.Sprintf("serve, untriggered, %s groups", count(groups)), "msgs/s", in.rate))
	sec.Notes = append(sec.Notes, fmt.Sprintf("serve row: %s untriggered messages pushed at once into the fake Telegram, counted until `clawpen serve` confirmed them all (each checked stored)", count(msgs)))

	rounds, perRound := 3, 30
	if o.Quick {
		rounds, perRound = 1, 12
	}
	var trouble []string
	for _, c := range []int{1, 2, 4} {
		o.progress("bench: inbound: %d answered messages through serve, CLAWPEN_MAX_CONCURRENT=%d", rounds*perRound, c)
		name := fmt.Sprintf("answered, max concurrent %d", c)
		lname := fmt.Sprintf("message→answer, max concurrent %d", c)
		res, err := serveAnswered(ctx, o, rounds, perRound, c)
		if err != nil {
			sec.Rows = append(sec.Rows, Row{Name: name, Skipped: err.Error()})
			continue
		}
		row, lrow := Value(name, "msgs/s", res.rate), Latency(lname, res.lat)
		if c != 1 {
			row.RatioTo, lrow.RatioTo = "answered, max concurrent 1", "message→answer, max concurrent 1"
		}
		sec.Rows = append(sec.Rows, row, lrow)
		if res.failed > 0 || res.timedOut > 0 {
			trouble = append(trouble, fmt.Sprintf("max concurrent %d: %d agent runs failed and were retried, %d sandboxes timed out", c, res.failed, res.timedOut))
		}
	}
	sec.Notes = append(sec.Notes, fmt.Sprintf("answered rows: `clawpen serve` with real bwrap sandboxes; %d round(s) of %d triggered messages pushed at once, each to its own group, the fake model answering at once; latency is from the push to the answer's sendMessage, rate is messages over the busy time of the rounds (Telegram pacing never holds an answer back)", rounds, perRound))
	for _, t := range trouble {
		sec.Notes = append(sec.Notes, "answered rows include retries: "+t)
	}
	return sec
}

// routerBench is the real router over a real store with groups registered
// and messages preloaded. It is not Run: a triggered message only marks its
// group's turn, and no agent runs.
type routerBench struct {
	dir    string
	open   func(ctx context.Context) (*store.Store, error) // nil: SQLite in dir
	st     *store.Store
	rt     *router.Router
	groups int
	nextID []int64 // per group: the last Telegram message id used
	rng    *rand.Rand
	n      int // messages handled so far, for unique texts
	stored int // messages preloaded so far
	setup  time.Duration
}

// newRouterBench makes the router bench on the store open opens (nil:
// SQLite in a temp dir).
func newRouterBench(ctx context.Context, groups, stored int, open func(ctx context.Context) (*store.Store, error)) (*routerBench, error) {
	dir, err := os.MkdirTemp("", "clawpen-bench-router-")
	if err != nil {
		return nil, fmt.Errorf("router bench: %w", err)
	}
	b := &routerBench{dir: dir, open: open, groups: groups, nextID: make([]int64, groups), rng: rand.New(rand.NewPCG(1, 2))}
	begin := time.Now()
	if err := b.openStore(ctx, stored); err != nil {
		b.Close()
		return nil, err
	}
	b.setup = time.Since(begin)
	// Warm up (caches, the WAL checkpoint after the preload) untimed, so the
	// first measured kind is not charged for it.
	if _, _, err := b.measure(ctx, min(200, max(stored/10, 10)), 4); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *routerBench) openStore(ctx context.Context, stored int) error {
	open := b.open
	if open == nil {
		open = func(ctx context.Context) (*store.Store, error) {
			return store.Open(ctx, filepath.Join(b.dir, "clawpen.db"))
		}
	}
	st, err := open(ctx)
	if err != nil {
		return fmt.Errorf("router bench: %w", err)
	}
	b.st = st
	if err := registerGroups(ctx, st, b.groups); err != nil {
		return err
	}
	if err := b.addMessages(ctx, stored); err != nil {
		return err
	}
	b.rt, err = router.New(ctx, router.Config{Store: st, OwnerID: ownerID, AssistantName: "Andy", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("router bench: %w", err)
	}
	return nil
}

// addMessages stores k messages as history, round robin over the groups,
// one in ten of them triggered.
func (b *routerBench) addMessages(ctx context.Context, k int) error {
	now := time.Now()
	for range k {
		g := b.stored % b.groups
		b.nextID[g]++
		_, _, err := b.st.AddMessage(ctx, domain.Message{
			ChatID: groupChat(g), MessageID: b.nextID[g], SenderID: memberID, SenderName: "member",
			Text: "preloaded message " + strconv.Itoa(b.stored), Time: now, Triggered: b.stored%10 == 0,
		})
		if err != nil {
			return fmt.Errorf("router bench: preload: %w", err)
		}
		b.stored++
	}
	return nil
}

// Close closes the store and removes the database.
func (b *routerBench) Close() {
	if b.st != nil {
		_ = b.st.Close()
	}
	_ = os.RemoveAll(b.dir)
}

// measure handles n messages into random groups, every `every`-th one
// calling the agent (0: none), and returns messages per second of wall time
// and each Handle's latency.
func (b *routerBench) measure(ctx context.Context, n, every int) (float64, []time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	triggered := 0
	handled := map[int64]int{} // per chat: messages handled
	begin := time.Now()
	for i := range n {
		b.n++
		g := b.rng.IntN(b.groups)
		b.nextID[g]++
		text := "just chatting, message " + strconv.Itoa(b.n)
		if every > 0 && i%every == every-1 {
			text = "@Andy what about message " + strconv.Itoa(b.n) + "?"
			triggered++
		}
		in := domain.Inbound{ChatID: groupChat(g), ChatType: "supergroup", ChatTitle: fmt.Sprint("chat ", g), MessageID: b.nextID[g],
			SenderID: memberID, SenderName: "member", Text: text, Time: time.Now()}
		start := time.Now()
		if err := b.rt.Handle(ctx, in); err != nil {
			return 0, nil, fmt.Errorf("router bench: handle: %w", err)
		}
		lat = append(lat, time.Since(start))
		handled[in.ChatID]++
	}
	rate := float64(n) / time.Since(begin).Seconds()
	// Every message was routed to its group and stored there, the triggered
	// ones as calling the agent.
	stored, calls := 0, 0
	for chat := range handled {
		msgs, err := b.st.MessagesAfter(ctx, chat, 0, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("router bench: %w", err)
		}
		for _, m := range msgs[max(0, len(msgs)-handled[chat]):] {
			stored++
			if m.Triggered {
				calls++
			}
		}
	}
	if stored != n || calls != triggered {
		return 0, nil, fmt.Errorf("router bench: %d of %d messages stored, %d of %d as calling the agent", stored, n, calls, triggered)
	}
	return rate, lat, nil
}

// answeredRun is one serve run with real sandboxes.
type answeredRun struct {
	rate     float64         // answered messages per second of busy time
	lat      []time.Duration // push → answer, per message
	failed   int             // agent runs that failed and were retried
	timedOut int             // sandboxes cut at the agent timeout
}

// serveAnswered runs serve with real bwrap sandboxes at CLAWPEN_MAX_CONCURRENT
// = concurrent. Each round pushes perRound triggered messages at once, one
// to each of its own groups, and waits for every answer, then a second more:
// fresh groups keep Telegram's per-chat pacing out of the way, and at most
// 30 answers within a second keep its global pacing out too. The rate is
// answered messages over the time from each round's first push to its last
// answer.
func serveAnswered(ctx context.Context, o Options, rounds, perRound, concurrent int) (answeredRun, error) {
	var res answeredRun
	n := rounds * perRound
	h, err := newServeHost(ctx, o, 0, map[string]string{
		"CLAWPEN_MAX_CONCURRENT": strconv.Itoa(concurrent),
		"CLAWPEN_AGENT_TIMEOUT":  "5s",
		"CLAWPEN_RETRY_BACKOFF":  "200ms,200ms",
	})
	if err != nil {
		return res, err
	}
	defer h.Close()
	// Registered with their folders as `clawpen groups add` does.
	err = withStore(ctx, h.s.DataDir(), func(st *store.Store) error {
		svc := ops.New(ops.Config{Store: st, GroupsDir: h.s.GroupsDir(), Logger: slog.New(slog.DiscardHandler)})
		for g := range n {
			if err := st.UpsertChat(ctx, domain.Chat{ID: groupChat(g), Title: fmt.Sprint("chat ", g), Type: "supergroup"}); err != nil {
				return err
			}
			gr := ops.GroupRequest{ChatID: groupChat(g), Folder: groupFolder(g), Name: fmt.Sprint("group ", g)}
			if _, err := svc.RegisterGroup(ctx, domain.Owner(), gr); err != nil {
				return fmt.Errorf("register group %d: %w", g, err)
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	p, _, err := h.start(ctx)
	if err != nil {
		return res, err
	}
	defer p.stop()
	from := faketg.User{ID: memberID, FirstName: "member"}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var busy time.Duration
	for r := range rounds {
		if r > 0 {
			if err := retry.Sleep(ctx, time.Second); err != nil {
				return res, err
			}
		}
		pushed := make([]time.Time, perRound)
		begin := time.Now()
		for i := range perRound {
			g := r*perRound + i
			pushed[i] = time.Now()
			h.f.TG.PushMessage(groupChat(g), "supergroup", fmt.Sprint("chat ", g), from, fmt.Sprintf("@Andy question %d, please answer", g))
		}
		var last time.Time
		for i := range perRound {
			sent, err := h.f.TG.WaitSent(wctx, groupChat(r*perRound+i), 1)
			if err != nil {
				return res, fmt.Errorf("answers: %w\n%s", err, p.logs.tail())
			}
			at := sent[0].Time
			res.lat = append(res.lat, at.Sub(pushed[i]))
			if at.After(last) {
				last = at
			}
		}
		busy += last.Sub(begin)
	}
	res.rate = float64(n) / busy.Seconds()
	logs := p.logs.String()
	res.failed = strings.Count(logs, "group run failed")
	res.timedOut = strings.Count(logs, "timed_out=true")
	return res, nil
}
