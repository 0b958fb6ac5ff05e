package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
)

// Row names of the host overhead section.
const (
	rowUpdateToStart = "update received → sandbox start"
	rowOutputToSend  = "agent result → sendMessage"
	rowResultToGone  = "agent result → sandbox gone (in parallel)"
)

// overhead is measureHostOverhead's samples. resultToGone is the agent's exit
// and the sandbox's teardown, which the answer no longer waits for (the
// runner hands the result over as soon as it arrives); it is reported beside.
type overhead struct {
	updateToStart, outputToSend, resultToGone []time.Duration
}

// overheadTarget is the target for both host overhead rows (p99).
const overheadTarget = 5 * time.Millisecond

func hostOverhead(ctx context.Context, o Options) Section {
	s := Section{Name: "host overhead"}
	runs := o.runs()
	o.progress("bench: host overhead, %d messages through the real poller, router, queue, runner and bwrap sandbox", runs)
	ov, err := measureHostOverhead(ctx, o, 0, runs)
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	target := fmt.Sprintf("p99 < %d ms", overheadTarget.Milliseconds())
	for _, r := range []Row{Latency(rowUpdateToStart, ov.updateToStart), Latency(rowOutputToSend, ov.outputToSend)} {
		s.Rows = append(s.Rows, r.WithTarget(target, r.P99 < ms(overheadTarget)))
	}
	s.Rows = append(s.Rows, Latency(rowResultToGone, ov.resultToGone))
	s.Notes = []string{
		"update received: the fake Telegram writes the update into a getUpdates answer; sandbox start: the runner calls the backend's Run. Between: the real telegram poller, router (store, trigger), queue and runner (host socket, job).",
		"agent result: the host reads the agent's result line from the sandbox's stdout; sendMessage: the request reaches the fake Telegram. Between: the runner's check of the output so far, the router's commit (cursor and outbox), delivery and the HTTP request. The sandbox's teardown (agent exit, bwrap and namespaces ending" + pinNote() + ") runs meanwhile; its row says how long it takes.",
		"one owner message at a time in the owner's private chat; the real clawpen-agent answers from the fake model; the first message warms up and is not counted.",
	}
	return s
}

func pinNote() string {
	if os.Geteuid() == 0 {
		return " (pins released, as a root host does)"
	}
	return ""
}

// measureHostOverhead runs the host `clawpen serve` runs (app.Serve, on
// the bwrap backend with the real agent, against the fake Telegram and
// model, with `groups` extra registered groups) in this process, and sends
// runs messages from the owner, one at a time. For each it returns the time
// from the fake Telegram handing the update out to the runner's sandbox
// start call, and from the agent's result line reaching the host to the
// answer's sendMessage arriving at the fake Telegram. One warm-up message is
// not counted.
func measureHostOverhead(ctx context.Context, o Options, groups int, runs int) (ov overhead, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sc, err := newScratch(o, "clawpen-bench-overhead-")
	if err != nil {
		return ov, err
	}
	defer sc.Close()
	if groups > 0 {
		if err := withStore(ctx, sc.DataDir(), func(st *store.Store) error { return registerGroups(ctx, st, groups) }); err != nil {
			return ov, err
		}
	}

	handed := make(chan handOut, 16)
	fk := startFakes(faketg.WithHandOut(func(id int64, at time.Time) {
		select {
		case handed <- handOut{id, at}:
		default: // nobody measures this one
		}
	}))
	defer fk.Close()

	cfg, err := config.FromEnv(mapEnv(serveEnv(o, sc, fk, map[string]string{"CLAWPEN_MAX_CONCURRENT": "1", "TZ": "UTC"})))
	if err != nil {
		return ov, fmt.Errorf("configuration: %w", err)
	}
	pr := &probe{started: make(chan time.Time, 1)}
	hooks := app.Hooks{
		Sandbox: func(sb runner.Sandbox) runner.Sandbox { pr.Sandbox = sb; return pr },
		Pacing:  telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1},
	}
	// On return: cancel, then wait for serve to return (its runs, the
	// poller and delivery stopped, the store closed, the backend released).
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	serveErr := make(chan error, 1)
	bg.Go(func() { serveErr <- app.Serve(ctx, cfg, slog.New(slog.DiscardHandler), hooks) })

	owner := faketg.User{ID: ownerID, FirstName: "owner"}
	for i := range runs + 1 {
		before := len(fk.TG.SentTo(ownerID))
		pr.reset()
		id := fk.TG.PushMessage(ownerID, "private", "", owner, fmt.Sprintf("message %d, answer shortly: REPLY ok", i))
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		sample, err := overheadSample(wctx, fk.TG, pr, handed, serveErr, id, before)
		var gone time.Time
		if err == nil {
			// The sandbox is gone before the next message, so samples do not
			// overlap (what is left of the run is the strip of its folders).
			gone, err = pr.waitGone(wctx)
		}
		wcancel()
		if err != nil {
			return ov, fmt.Errorf("message %d: %w", i, err)
		}
		if i == 0 {
			continue // warm-up: first database writes, first sandbox, cold caches
		}
		ov.updateToStart = append(ov.updateToStart, sample[0])
		ov.outputToSend = append(ov.outputToSend, sample[1])
		ov.resultToGone = append(ov.resultToGone, gone.Sub(pr.resultAt()))
	}
	return ov, nil
}

type handOut struct {
	id int64
	at time.Time
}

// overheadSample waits for one message's hand-out, sandbox start and answer.
func overheadSample(ctx context.Context, tg *faketg.Server, pr *probe, handed <-chan handOut, serveErr <-chan error, id int64, before int) ([2]time.Duration, error) {
	var got [2]time.Duration
	var handedAt, startedAt time.Time
	for handedAt.IsZero() {
		select {
		case h := <-handed:
			if h.id == id {
				handedAt = h.at
			}
		case err := <-serveErr:
			return got, fmt.Errorf("serve stopped: %w", err)
		case <-ctx.Done():
			return got, fmt.Errorf("update %d never handed out: %w", id, ctx.Err())
		}
	}
	// A start stamped before the hand-out is a retry of the message before
	// (its stamp waited in the channel): not this message's.
	for !startedAt.After(handedAt) {
		select {
		case startedAt = <-pr.started:
		case <-ctx.Done():
			return got, fmt.Errorf("no sandbox started: %w", ctx.Err())
		}
	}
	sent, err := tg.WaitSent(ctx, ownerID, before+1)
	if err != nil {
		return got, fmt.Errorf("no answer sent: %w", err)
	}
	resultAt := pr.resultAt()
	if resultAt.IsZero() {
		return got, errors.New("the agent wrote no result line")
	}
	got[0] = startedAt.Sub(handedAt)
	got[1] = sent[before].Time.Sub(resultAt)
	return got, nil
}

// probe wraps the backend serve picked: it records when the runner asked
// for a sandbox, and when the agent's result line reached the host.
type probe struct {
	runner.Sandbox // set by app.Serve's hook, before the host is built
	started        chan time.Time

	mu     sync.Mutex
	result time.Time
	gone   chan time.Time // the backend's Run returned: the sandbox is gone
}

func (p *probe) reset() {
	p.mu.Lock()
	p.result, p.gone = time.Time{}, make(chan time.Time, 1)
	p.mu.Unlock()
	for {
		select {
		case <-p.started: // a late retry's start, from the message before
		default:
			return
		}
	}
}

// waitGone waits until the sandbox of the current message is gone.
func (p *probe) waitGone(ctx context.Context) (time.Time, error) {
	p.mu.Lock()
	gone := p.gone
	p.mu.Unlock()
	select {
	case at := <-gone:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

func (p *probe) resultAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.result
}

func (p *probe) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	select {
	case p.started <- time.Now():
	default: // a retry; the first start is the one measured
	}
	sp.Stdout = &resultStamp{w: sp.Stdout, p: p}
	res, err := p.Sandbox.Run(ctx, sp)
	p.mu.Lock()
	select {
	case p.gone <- time.Now():
	default: // a retry; the first end is the one measured
	}
	p.mu.Unlock()
	return res, err
}

// resultStamp passes the agent's stdout through and notes when a complete
// result (or error) event line arrived: the agent's final output.
type resultStamp struct {
	w    io.Writer
	p    *probe
	line []byte // the unfinished last line
}

func (r *resultStamp) Write(b []byte) (int, error) {
	at := time.Now()
	r.line = append(r.line, b...)
	for {
		i := bytes.IndexByte(r.line, '\n')
		if i < 0 {
			break
		}
		var ev domain.Event
		if json.Unmarshal(r.line[:i], &ev) == nil && (ev.Type == domain.EventResult || ev.Type == domain.EventError) {
			r.p.mu.Lock()
			r.p.result = at
			r.p.mu.Unlock()
		}
		r.line = r.line[i+1:]
	}
	return r.w.Write(b)
}

// mapEnv reads a configuration from env alone, as config.FromEnv reads the
// process's environment for serve.
func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}
