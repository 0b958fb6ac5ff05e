package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/store"
)

// inProcess stands in for a sandbox backend: it runs clawpen-agent's loop
// in the test's process against the run's real host socket, and counts the
// sandboxes it was asked to start. The isolation itself is tested in
// test/e2e and test/escape with the real backends.
type inProcess struct {
	mu     sync.Mutex
	starts int
	// askModel, when set, replaces the job's model: a sandbox asking the
	// proxy for a model of its choosing.
	askModel string
}

func (*inProcess) Name() string { return "in-process" }

func (b *inProcess) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	b.mu.Lock()
	b.starts++
	b.mu.Unlock()
	job, err := sp.WaitJob(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	var j domain.Job
	if err := json.Unmarshal(job, &j); err != nil {
		return sandbox.Result{}, err
	}
	if b.askModel != "" {
		j.Model = b.askModel
	}
	text, err := agent.Run(ctx, j, agent.Options{WorkspaceDir: sp.GroupDir, GlobalDir: sp.GlobalDir, HomeDir: sp.SessionDir,
		SocketPath: sp.SocketPath, Logger: slog.New(slog.DiscardHandler)})
	ev := domain.Event{Type: domain.EventResult, Text: text}
	code := 0
	if err != nil {
		ev, code = domain.Event{Type: domain.EventError, Error: err.Error()}, 1
	}
	_ = json.NewEncoder(sp.Stdout).Encode(ev)
	return sandbox.Result{ExitCode: code}, nil
}

func (b *inProcess) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts
}

// The budget holds for a day: a run that uses it up ends its day's runs,
// refused before a sandbox starts or a provider is called, and the next
// day (the clock injected, not slept) the group runs again.
func TestBudgetRefusesUntilTheNextDay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "data", "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	llm := fakellm.New()
	t.Cleanup(llm.Close)

	loc := time.FixedZone("X", -3*3600)
	var mu sync.Mutex
	now := time.Date(2026, 5, 4, 23, 30, 0, 0, loc)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	budget := domain.Profile{Name: "small", DailyTokens: 1000}
	sb := &inProcess{}
	r := New(Config{
		GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL()}},
		Profile: func(string) (domain.Profile, error) { return budget, nil },
		Usage:   st, Now: clock, TZ: loc, Audit: st.Audit, Logger: slog.New(slog.DiscardHandler),
	}, sb)
	g := domain.Group{Folder: "family", ChatID: -5, Profile: "small"}
	run := func(prompt string) (Answer, error) {
		return r.Start(ctx, Request{Group: g, Prompt: prompt, ContextMode: domain.ContextIsolated}).Wait()
	}

	// Under the budget: runs, and its two model calls go over it.
	ans, err := run(`TOOL bash {"command":"true"} USAGE 300 250 REPLY done`)
	require.NoError(t, err)
	assert.Equal(t, "done", ans.Text)
	u, err := st.UsageOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, domain.Usage{Group: "family", Day: "2026-05-04", Input: 600, Output: 500, Requests: 2}, u)
	require.Len(t, llm.Requests(), 2)

	// Over it: refused before any sandbox starts.
	_, err = run("REPLY again")
	require.ErrorIs(t, err, ErrBudget)
	var be *BudgetError
	require.True(t, errors.As(err, &be))
	assert.Equal(t, BudgetError{Day: "2026-05-04", Budget: 1000, Used: 1100}, *be)
	assert.Equal(t, 1, sb.count(), "no sandbox started")
	assert.Len(t, llm.Requests(), 2, "no provider call")
	log, err := st.AuditLog(ctx, 1)
	require.NoError(t, err)
	require.Len(t, log, 1)
	assert.Equal(t, domain.AuditEntry{ID: log[0].ID, Time: log[0].Time, Group: "family", Operation: "agent.run", Decision: "deny",
		Reason: "daily token budget of 1000 reached; no sandbox started"}, log[0])

	// The next day in TZ (00:30 there, still the 4th in UTC): runs again.
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	ans, err = run("USAGE 900 200 REPLY morning")
	require.NoError(t, err)
	assert.Equal(t, "morning", ans.Text)
	assert.Equal(t, 2, sb.count())

	// The same day, a run whose sandbox started under the budget but whose
	// model call came after it was used up ends with ErrBudget too.
	require.NoError(t, st.AddUsage(ctx, "family", "claude-test", "2026-05-05", 0, 0))
	budget.DailyTokens = 1101 // 1100 used: the run may start
	_, err = run(`TOOL bash {"command":"true"} USAGE 10 1 REPLY never`)
	require.ErrorIs(t, err, ErrBudget, "the first call (11 tokens) reaches the budget; the second is refused")
	require.True(t, errors.As(err, &be))
	assert.Equal(t, BudgetError{Day: "2026-05-05", Budget: 1101, Used: 1111}, *be)
	assert.Equal(t, 3, sb.count())
	assert.Len(t, llm.Requests(), 4, "one call of that run reached the provider, its retry none")
}

// A group without a budget is never refused, whatever it used.
func TestNoBudgetNoRefusal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "data", "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.AddUsage(ctx, "family", "claude-test", domain.Day(time.Now(), time.Local), 1<<40, 0))
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	r := New(Config{GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL()}}, Usage: st,
		Logger: slog.New(slog.DiscardHandler)}, &inProcess{})
	ans, err := r.Start(ctx, Request{Group: domain.Group{Folder: "family", ChatID: -5}, Prompt: "REPLY ok"}).Wait()
	require.NoError(t, err)
	assert.Equal(t, "ok", ans.Text)
}
