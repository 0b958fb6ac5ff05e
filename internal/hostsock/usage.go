package hostsock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// The model proxy counts the tokens of every answer as its bytes pass to
// the agent, and refuses model requests once the group's daily budget is
// used (DESIGN.md, "Usage and budgets").

// UsageBook is where token use is kept: per group, model and day (the store).
type UsageBook interface {
	AddUsage(ctx context.Context, group, model, day string, input, output int64) error
	UsageOn(ctx context.Context, group, day string) (domain.Usage, error)
}

// BudgetRefusal is a model request the socket refused because the group's
// daily token budget was used up.
type BudgetRefusal struct {
	Day    string // domain.DayLayout, in the socket's time zone
	Budget int64
	Used   int64
}

// BudgetReason is the refusal's reason: what follows "denied: ".
func BudgetReason(budget int64) string {
	return fmt.Sprintf("daily token budget of %d reached", budget)
}

// BudgetRefused reports whether the socket refused a model request for the
// budget, and the first such refusal: the run it served ended for it.
func (s *Server) BudgetRefused() (BudgetRefusal, bool) {
	s.budgetMu.Lock()
	defer s.budgetMu.Unlock()
	if s.budgetRefusal == nil {
		return BudgetRefusal{}, false
	}
	return *s.budgetRefusal, true
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

func (s *Server) day() string { return domain.Day(s.now(), s.cfg.TZ) }

// withinBudget answers the request itself, without calling the provider,
// when the group's budget for today is used, or cannot be read (fail
// closed), and reports whether the request may go on.
func (s *Server) withinBudget(w http.ResponseWriter, r *http.Request) bool {
	budget := s.cfg.Profile.DailyTokens
	if budget <= 0 {
		return true
	}
	if s.cfg.Usage == nil {
		s.budgetUnreadable(w, errors.New("the profile sets a token budget but the host keeps no usage"))
		return false
	}
	day, used, err := s.usedToday(r.Context())
	switch {
	case err != nil:
		s.budgetUnreadable(w, err)
	case used < budget:
		return true
	default:
		s.refuseBudget(w, r, BudgetRefusal{Day: day, Budget: budget, Used: used})
	}
	return false
}

// usedToday is the group's recorded use of today.
func (s *Server) usedToday(ctx context.Context) (day string, used int64, err error) {
	day = s.day()
	u, err := s.cfg.Usage.UsageOn(ctx, s.caller.Group, day)
	return day, u.Total(), err
}

func (s *Server) budgetUnreadable(w http.ResponseWriter, err error) {
	s.log.Error("cannot read token usage; refusing", "err", err)
	writeError(w, http.StatusServiceUnavailable, "the host cannot read this group's token budget")
}

// refuseBudget answers a model request refused for the budget.
func (s *Server) refuseBudget(w http.ResponseWriter, r *http.Request, b BudgetRefusal) {
	s.budgetMu.Lock()
	if s.budgetRefusal == nil {
		s.budgetRefusal = &b
	}
	s.budgetMu.Unlock()
	// Retrying cannot help before tomorrow: the SDKs honour x-should-retry.
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, http.StatusTooManyRequests, "denied: "+BudgetReason(b.Budget))
	s.refusals.note(operation(r.URL.Path), BudgetReason(b.Budget))
}

// promptOverhead is what a provider may bill beyond a request's own bytes:
// the system prompt it adds for tool use is some 350 tokens.
const promptOverhead = 1 << 10

// exchange is one model request to the provider, from the reservation of
// its worst case until its usage is recorded, which may be after its
// client left: the provider bills an answer the sandbox hung up on.
type exchange struct {
	s *Server
	// worst is the most the request can cost: its body's bytes (a token
	// is at least one byte of its text) and promptOverhead as input, its
	// max_tokens as output. It is what is held in the ledger, and what is
	// charged for what an answer cut short did not report.
	worst tokens
	held  int64 // in the ledger: worst, or 0 without a budget
	// body is the rebuilt request: the transport's to read and close,
	// which gives its bytes back to the socket's bytes in flight.
	body io.ReadCloser
	// ctx is the upstream call's: it outlives the client by DrainTimeout.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	unwatch func() bool
	once    sync.Once
	sent    bool // the transport has it (set and read in the handler's goroutine)

	mu       sync.Mutex     // guards following
	gone     bool           // the client left
	toClient *io.PipeWriter // the answer on its way to the client
	timer    *time.Timer
	ended    bool
}

type exchangeKey struct{}

// exchangeOf is r's exchange (nil when its usage is not counted).
func exchangeOf(r *http.Request) *exchange {
	x, _ := r.Context().Value(exchangeKey{}).(*exchange)
	return x
}

var (
	errDrainTimeout = errors.New("the answer was still coming when its client had been gone for the drain timeout")
	errDrainBytes   = errors.New("the answer went on past the drain's bytes")
	errNoDrain      = errors.New("too many answers are being read after their client left")
)

// open starts r's exchange, worst its most: under a budget it reserves
// worst in the ledger, waiting while the group's requests in flight might
// take it past the budget, and refuses once the recorded use has reached
// it. On failure it has answered r.
func (s *Server) open(w http.ResponseWriter, r *http.Request, worst tokens) (*exchange, bool) {
	if !s.exchanges.TryAcquire(1) {
		writeError(w, http.StatusServiceUnavailable, "the host socket is closing")
		return nil, false
	}
	x := &exchange{s: s, worst: worst}
	if budget := s.cfg.Profile.DailyTokens; budget > 0 {
		var day string
		used := func(ctx context.Context) (u int64, err error) {
			day, u, err = s.usedToday(ctx)
			return u, err
		}
		u, ok, err := s.ledger.reserve(r.Context(), s.caller.Group, budget, worst.total(), used)
		if !ok {
			s.exchanges.Release(1)
			switch {
			case err != nil && r.Context().Err() != nil: // the client left while it waited
			case err != nil:
				s.budgetUnreadable(w, err)
			default:
				s.refuseBudget(w, r, BudgetRefusal{Day: day, Budget: budget, Used: u})
			}
			return nil, false
		}
		x.held = worst.total()
	}
	x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
	x.unwatch = context.AfterFunc(r.Context(), x.clientLeft)
	return x, true
}

// clientLeft lets the sandbox's handler go at once (the answer it was
// waiting for is read without it) and gives the upstream call
// DrainTimeout more to end.
func (x *exchange) clientLeft() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gone = true
	if x.toClient != nil {
		// The handler's read ends as if the upstream call had been cancelled.
		x.toClient.CloseWithError(context.Canceled)
	}
	if !x.ended {
		x.timer = time.AfterFunc(x.s.lim.DrainTimeout, func() { x.cancel(errDrainTimeout) })
	}
}

// handled is called when the request's handler returns: an exchange that
// never reached the transport ends here.
func (x *exchange) handled() {
	if !x.sent {
		_ = x.body.Close()
		x.settle(tokens{}, false)
	}
}

// settle records the exchange's usage (t, when ok) and then gives back its
// reservation, once: a request settling meanwhile sees the tokens held or
// recorded, never neither.
func (x *exchange) settle(t tokens, ok bool) {
	x.once.Do(func() {
		x.mu.Lock()
		x.ended = true
		if x.timer != nil {
			x.timer.Stop()
		}
		x.mu.Unlock()
		x.unwatch()
		x.cancel(nil)
		x.s.recordUsage(t, ok)
		if x.held > 0 {
			x.s.ledger.release(x.s.caller.Group, x.held)
		}
		x.s.exchanges.Release(1)
	})
}

// meteredTransport sends a model request whose usage counts on its
// exchange's own context, so that the call goes on when the sandbox hangs
// up, and meters its answer (exchange.pump). The sandbox's handler
// returns as soon as the sandbox is gone, holding none of its connections.
type meteredTransport struct {
	next http.RoundTripper
	api  apiShape
}

func (t meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchangeOf(req)
	if x == nil {
		return t.next.RoundTrip(req)
	}
	x.sent = true
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	out := req.WithContext(x.ctx)
	// Not the body ReverseProxy passes, which it closes when the handler
	// returns: the transport may read it once more after that.
	out.Body = x.body
	go func() {
		resp, err := t.next.RoundTrip(out)
		if err != nil {
			// No answer: free, unless the drain timeout cut it, when the
			// provider may have been at work on it.
			cut := errors.Is(context.Cause(x.ctx), errDrainTimeout)
			x.settle(x.worst, cut)
		} else {
			x.meter(resp, t.api)
		}
		got <- answer{resp, err}
	}()
	select {
	case a := <-got:
		return a.resp, a.err
	case <-req.Context().Done():
		return nil, context.Cause(req.Context()) // the answer, if any, is the pump's
	}
}

// meter hands resp's body to a pump and gives the client the pump's end.
func (x *exchange) meter(resp *http.Response, api apiShape) {
	m := &usageMeter{api: api, sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	pr, pw := io.Pipe()
	up := resp.Body
	resp.Body = pr
	x.mu.Lock()
	x.toClient = pw
	if x.gone {
		pw.CloseWithError(context.Canceled)
	}
	x.mu.Unlock()
	go x.pump(up, pw, m, resp.StatusCode/100 == 2)
}

// pump reads the answer, feeding its meter, and passes it to the client
// while the client takes it; once the client stops (it left), it reads on
// alone to the usage, for DrainBytes at most and until DrainTimeout after
// the client left, MaxDrains of a socket at once. Then it settles the
// exchange: with the usage the answer reported when it was read to its end
// or is not a success (an error is not billed), else as usageMeter.cut.
func (x *exchange) pump(up io.ReadCloser, pw *io.PipeWriter, m *usageMeter, billed bool) {
	buf := make([]byte, 32<<10)
	draining := false
	var drained int64
	var err error
	for err == nil {
		var n int
		n, err = up.Read(buf)
		if n == 0 {
			continue
		}
		m.write(buf[:n])
		if draining {
			if drained += int64(n); drained > x.s.lim.DrainBytes {
				err = errDrainBytes
			}
			continue
		}
		if _, werr := pw.Write(buf[:n]); werr != nil {
			if !x.s.drains.TryAcquire(1) {
				err = errNoDrain
				break
			}
			draining = true
		}
	}
	_ = up.Close()
	if draining {
		x.s.drains.Release(1)
	}
	if err == io.EOF || !billed {
		x.settle(m.result())
	} else {
		t := m.cut(x.worst)
		x.s.log.Warn("answer cut short; charged its worst case", "reason", err, "input", t.in, "output", t.out)
		x.settle(t, true)
	}
	_ = pw.CloseWithError(err) // EOF, or why the answer ends early
}

func (s *Server) recordUsage(t tokens, ok bool) {
	if !ok {
		return
	}
	if t.in == 0 && t.out == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	day := s.day()
	if err := s.cfg.Usage.AddUsage(ctx, s.caller.Group, s.policy.Model, day, t.in, t.out); err != nil {
		s.log.Error("record token usage", "err", err, "input", t.in, "output", t.out)
		return
	}
	s.log.Debug("token usage", "input", t.in, "output", t.out, "day", day)
}

// apiShape is the wire format of an answer.
type apiShape int

const (
	anthropicShape apiShape = iota
	openaiShape
)

// Bounds on what the meter holds of one answer: an SSE line with usage is
// a few hundred bytes (longer lines carry content and are skipped); a whole
// answer of DefaultMaxTokens is well below a MiB.
const (
	maxSSELine  = 64 << 10
	maxJSONBody = 4 << 20
)

type tokens struct{ in, out int64 }

func (t tokens) total() int64 { return t.in + t.out }

// usageMeter finds the usage in an answer fed to it piece by piece.
type usageMeter struct {
	api apiShape
	sse bool

	line     []byte // SSE: the line so far
	skipLine bool   // SSE: the line is longer than maxSSELine
	body     []byte // JSON: the body so far
	tooBig   bool   // JSON: longer than maxJSONBody

	a     anthropicUsage // what the answer said so far (Anthropic)
	o     openaiUsage    // (OpenAI)
	found bool
}

// anthropicUsage is the Messages API's usage. In a stream, message_start
// gives all of it and message_delta the running totals of what it names.
type anthropicUsage struct {
	Input       *int64 `json:"input_tokens"`
	Output      *int64 `json:"output_tokens"`
	CacheWrites *int64 `json:"cache_creation_input_tokens"`
	CacheReads  *int64 `json:"cache_read_input_tokens"`
}

// openaiUsage is the chat completions usage; prompt_tokens already
// includes cached tokens.
type openaiUsage struct {
	Prompt     *int64 `json:"prompt_tokens"`
	Completion *int64 `json:"completion_tokens"`
}

func (m *usageMeter) write(p []byte) {
	if !m.sse {
		if m.tooBig {
			return
		}
		if len(m.body)+len(p) > maxJSONBody {
			m.tooBig, m.body = true, nil
			return
		}
		m.body = append(m.body, p...)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !m.skipLine {
			if len(m.line)+len(chunk) > maxSSELine {
				m.skipLine, m.line = true, m.line[:0]
			} else {
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !m.skipLine {
			m.sseLine(bytes.TrimSuffix(m.line, []byte("\r")))
		}
		m.line, m.skipLine = m.line[:0], false
		p = p[i+1:]
	}
}

// sseLine reads one line of an event stream: only data lines matter.
func (m *usageMeter) sseLine(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return // "[DONE]" and the like
	}
	if m.api == openaiShape {
		m.openai(data)
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsage `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		m.anthropic(ev.Message.Usage)
	case "message_delta":
		m.anthropic(ev.Usage)
	}
}

// anthropic takes the fields u names: later values are running totals.
func (m *usageMeter) anthropic(u *anthropicUsage) {
	if u == nil {
		return
	}
	m.found = true
	for _, f := range []struct{ dst, src **int64 }{
		{&m.a.Input, &u.Input}, {&m.a.Output, &u.Output},
		{&m.a.CacheWrites, &u.CacheWrites}, {&m.a.CacheReads, &u.CacheReads},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// openai takes the usage of a chunk or answer that has one (a stream's last
// chunk, with stream_options.include_usage).
func (m *usageMeter) openai(data []byte) {
	var v struct {
		Usage *openaiUsage `json:"usage"`
	}
	if json.Unmarshal(data, &v) != nil || v.Usage == nil {
		return
	}
	m.found = true
	if v.Usage.Prompt != nil {
		m.o.Prompt = v.Usage.Prompt
	}
	if v.Usage.Completion != nil {
		m.o.Completion = v.Usage.Completion
	}
}

// result is the tokens the answer reported, and whether it reported any.
func (m *usageMeter) result() (tokens, bool) {
	if !m.sse && !m.tooBig && len(m.body) > 0 {
		if m.api == openaiShape {
			m.openai(m.body)
		} else {
			var v struct {
				Usage *anthropicUsage `json:"usage"`
			}
			if json.Unmarshal(m.body, &v) == nil {
				m.anthropic(v.Usage)
			}
		}
		m.body = nil
	}
	if m.sse && !m.skipLine && len(m.line) > 0 {
		m.sseLine(m.line) // a last line without its newline
		m.line = nil
	}
	if !m.found {
		return tokens{}, false
	}
	n := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	if m.api == openaiShape {
		return tokens{in: n(m.o.Prompt), out: n(m.o.Completion)}, true
	}
	return tokens{in: n(m.a.Input) + n(m.a.CacheWrites) + n(m.a.CacheReads), out: n(m.a.Output)}, true
}

// cut is what an answer that ended before its end is charged: the input
// it reported (Anthropic's message_start) or else worst's, and worst's
// output, since the provider bills what it wrote, which nobody read.
func (m *usageMeter) cut(worst tokens) tokens {
	t, _ := m.result()
	if m.a.Input == nil && m.o.Prompt == nil {
		t.in = worst.in
	}
	return tokens{in: t.in, out: worst.out}
}
