package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/store"
)

// client stands in for a sandbox whose agent is any code: it takes the
// job, runs do against the run's real host socket, and reports a result.
// The isolation itself is tested in test/e2e and test/escape.
type client struct {
	do func(ctx context.Context, hc *http.Client) error
}

func (client) Name() string { return "client" }

func (c client) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	if _, err := sp.WaitJob(ctx); err != nil {
		return sandbox.Result{}, err
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sp.SocketPath)
		},
	}}
	ev := domain.Event{Type: domain.EventResult, Text: "done"}
	if err := c.do(ctx, hc); err != nil {
		ev = domain.Event{Type: domain.EventError, Error: err.Error()}
	}
	return sandbox.Result{}, json.NewEncoder(sp.Stdout).Encode(ev)
}

// modelRequest is a request body either API takes.
func modelRequest(stream bool, maxTokens int, prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": prompt}}})
	return string(b)
}

// budgetRunner is a runner whose every group has profile p, counting its
// usage in st on the day of clock, with its sandboxes sb; both APIs go to
// llm.
func budgetRunner(t *testing.T, st *store.Store, llm *fakellm.Server, p domain.Profile, clock func() time.Time, sb Sandbox) *Runner {
	dir := t.TempDir()
	return New(Config{
		GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{
			Anthropic: hostsock.Upstream{BaseURL: llm.URL()}, OpenAI: hostsock.Upstream{BaseURL: llm.URL() + "/v1"}},
		Profile: func(string) (domain.Profile, error) { return p, nil },
		Usage:   st, Now: clock, TZ: time.UTC, Logger: slog.New(slog.DiscardHandler),
	}, sb)
}

func openStore(t *testing.T) *store.Store {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A sandbox that hangs up after the first streamed chunk of an answer is
// charged the answer in full, as the provider bills it, run after run and
// in both APIs: ten such runs use up a budget of ten answers, and the next
// run is refused.
func TestHangupAfterTheFirstChunkIsCharged(t *testing.T) {
	const in, out = 5000, 700
	clock := func() time.Time { return time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC) }
	for _, api := range []struct{ name, path, marker string }{
		{"anthropic", "/v1/messages", "text_delta"},
		{"openai", "/v1/chat/completions", `"content":"Parag`},
	} {
		t.Run(api.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t)
			llm := fakellm.New()
			t.Cleanup(llm.Close)
			// The answer is still coming (DRIP) when the sandbox hangs up.
			body := modelRequest(true, 1000, fmt.Sprintf("USAGE %d %d DRIP 20ms REPLY_LONG 400", in, out))
			hangUp := client{do: func(ctx context.Context, hc *http.Client) error {
				resp, err := hc.Post("http://clawpen"+api.path, "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() && !strings.Contains(sc.Text(), api.marker) {
				}
				return resp.Body.Close()
			}}
			r := budgetRunner(t, st, llm, domain.Profile{Name: "small", DailyTokens: 10 * (in + out)}, clock, hangUp)
			g := domain.Group{Folder: "family", ChatID: -5, Profile: "small"}
			for i := int64(1); i <= 10; i++ {
				ans, err := r.Start(ctx, Request{Group: g, Prompt: "hang up"}).Wait()
				require.NoError(t, err)
				require.Equal(t, "done", ans.Text)
				u, err := st.UsageOn(ctx, "family", "2026-05-04")
				require.NoError(t, err)
				require.Equal(t, domain.Usage{Group: "family", Day: "2026-05-04", Input: i * in, Output: i * out, Requests: i}, u,
					"after run %d", i)
			}
			_, err := r.Start(ctx, Request{Group: g, Prompt: "hang up"}).Wait()
			require.ErrorIs(t, err, ErrBudget)
			assert.Len(t, llm.Requests(), 10)
		})
	}
}

// Requests at once, from two runs of a group and over both APIs, do not
// take the group past its budget by more than one request's worst case:
// each holds its worst case until its usage is recorded, and waits while
// those in flight might cross the budget. Only the recorded use reaching
// the budget refuses a request.
func TestRequestsAtOnceStayWithinTheBudget(t *testing.T) {
	ctx := context.Background()
	const budget, used = 100_000, 90_000
	clock := func() time.Time { return time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC) }
	st := openStore(t)
	require.NoError(t, st.AddUsage(ctx, "family", "claude-test", "2026-05-04", used, 0))
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	// Each answer costs 1,000 tokens and takes a second: all are in flight together.
	body := modelRequest(false, 100, "USAGE 900 100 SLEEP 1s REPLY ok")
	// One request's worst case: its body's bytes (rebuilt, a few more) and
	// the provider's overhead as input, its max_tokens as output.
	worst := int64(len(body)) + 64 + 1024 + 100

	var mu sync.Mutex
	statuses := map[int]int{}
	burst := client{do: func(ctx context.Context, hc *http.Client) error {
		var wg sync.WaitGroup
		for i := range 10 {
			path := "/v1/messages"
			if i%2 == 1 {
				path = "/v1/chat/completions"
			}
			wg.Go(func() {
				resp, err := hc.Post("http://clawpen"+path, "application/json", strings.NewReader(body))
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return nil
	}}
	r := budgetRunner(t, st, llm, domain.Profile{Name: "small", DailyTokens: budget}, clock, burst)
	g := domain.Group{Folder: "family", ChatID: -5, Profile: "small"}
	runs := []*Invocation{r.Start(ctx, Request{Group: g, Prompt: "burst"}), r.Start(ctx, Request{Group: g, Prompt: "burst"})}
	for _, iv := range runs {
		_, err := iv.Wait()
		require.NoError(t, err)
	}

	u, err := st.UsageOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	t.Logf("answers %v; used %d of %d", statuses, u.Total(), budget)
	assert.Equal(t, 20, statuses[http.StatusOK]+statuses[http.StatusTooManyRequests], "each answered or refused for the budget: %v", statuses)
	assert.LessOrEqual(t, u.Total(), int64(budget)+worst, "over the budget by more than one request's worst case")
	assert.GreaterOrEqual(t, u.Total(), int64(budget), "refused before the recorded use reached the budget")
	assert.Equal(t, int64(statuses[http.StatusOK]), u.Requests-1, "every answer recorded")
}
