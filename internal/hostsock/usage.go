package hostsock

import (
	"bytes"
	"context"
	"encoding/json"
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
	day := s.day()
	if s.cfg.Usage == nil {
		s.log.Error("the profile sets a token budget but the host keeps no usage; refusing")
		writeError(w, http.StatusServiceUnavailable, "the host cannot read this group's token budget")
		return false
	}
	u, err := s.cfg.Usage.UsageOn(r.Context(), s.caller.Group, day)
	if err != nil {
		s.log.Error("read token usage", "err", err)
		writeError(w, http.StatusServiceUnavailable, "the host cannot read this group's token budget")
		return false
	}
	if u.Total() < budget {
		return true
	}
	s.budgetMu.Lock()
	if s.budgetRefusal == nil {
		s.budgetRefusal = &BudgetRefusal{Day: day, Budget: budget, Used: u.Total()}
	}
	s.budgetMu.Unlock()
	// Retrying cannot help before tomorrow: the SDKs honour x-should-retry.
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, http.StatusTooManyRequests, "denied: "+BudgetReason(budget))
	s.refusals.note(operation(r.URL.Path), BudgetReason(budget))
	return false
}

// meterUsage makes resp's body count the answer's tokens as the agent reads
// it, and record them when it ends (or the agent goes away mid-answer:
// what the provider sent is billed). Nothing it finds, or fails to find,
// changes a byte of the answer.
func (s *Server) meterUsage(resp *http.Response, api apiShape) {
	if s.cfg.Usage == nil || resp.Request == nil || resp.Request.URL.Path == "/v1/messages/count_tokens" {
		return
	}
	ct := resp.Header.Get("Content-Type")
	m := &usageMeter{api: api, sse: strings.HasPrefix(ct, "text/event-stream")}
	resp.Body = &meteredBody{rc: resp.Body, m: m, done: s.recordUsage}
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

// meteredBody passes an answer through, feeding its meter, and hands the
// result to done once: at the end of the body or when it is closed.
type meteredBody struct {
	rc   io.ReadCloser
	m    *usageMeter
	done func(tokens, bool)
	once sync.Once
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.m.write(p[:n])
	}
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

func (b *meteredBody) finish() { b.once.Do(func() { b.done(b.m.result()) }) }
