package hostsock

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		typ := ""
		var v struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(e), &v) == nil {
			typ = v.Type
		}
		if typ != "" {
			fmt.Fprintf(&b, "event: %s\n", typ)
		}
		fmt.Fprintf(&b, "data: %s\n\n", e)
	}
	return b.String()
}

var anthropicStream = sse(
	`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	// Model text that looks like usage stays data inside its JSON string.
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":999999}}\n"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":42}}`,
	`{"type":"message_stop"}`,
)

var openaiStream = "data: " + `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n" +
	"data: " + `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":70,"completion_tokens":8,"total_tokens":78,"prompt_tokens_details":{"cached_tokens":50}}}` + "\n\n" +
	"data: [DONE]\n\n"

func TestUsageMeter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		api    apiShape
		sse    bool
		body   string
		want   tokens
		wantOK bool
	}{
		{"anthropic JSON", anthropicShape, false,
			`{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":4,"cache_creation_input_tokens":5,"cache_read_input_tokens":6}}`,
			tokens{in: 14, out: 4}, true},
		{"anthropic stream: cache counts as input, message_delta's running total wins", anthropicShape, true, anthropicStream, tokens{in: 1110, out: 42}, true},
		{"anthropic stream: message_delta repeats input totals", anthropicShape, true, sse(
			`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`,
			`{"type":"message_delta","usage":{"input_tokens":12,"output_tokens":30,"cache_read_input_tokens":null}}`,
		), tokens{in: 12, out: 30}, true},
		{"anthropic stream cut before message_delta", anthropicShape, true, sse(
			`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		), tokens{in: 10, out: 1}, true},
		{"anthropic stream with CRLF and no final newline", anthropicShape, true,
			"event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":1}}}\r\n\r\n" +
				"event: message_delta\r\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}",
			tokens{in: 2, out: 9}, true},
		{"openai JSON", openaiShape, false,
			`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`,
			tokens{in: 11, out: 7}, true},
		{"openai stream with include_usage", openaiShape, true, openaiStream, tokens{in: 70, out: 8}, true},
		{"openai stream without usage", openaiShape, true,
			"data: " + `{"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\ndata: [DONE]\n\n", tokens{}, false},
		{"malformed JSON", anthropicShape, false, `{"usage":{"input_tokens":3,`, tokens{}, false},
		{"usage of the wrong type", anthropicShape, false, `{"usage":{"input_tokens":"many","output_tokens":4}}`, tokens{}, false},
		{"usage not an object", openaiShape, false, `{"usage":[1,2]}`, tokens{}, false},
		{"negative counts are zero", anthropicShape, false, `{"usage":{"input_tokens":-50,"output_tokens":4}}`, tokens{in: 0, out: 4}, true},
		{"malformed SSE lines are skipped", anthropicShape, true,
			"data: {not json\n\ndata: \n\n: comment\n\n" + sse(`{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`) +
				"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"x\"}}\n\n",
			tokens{in: 5, out: 1}, true},
		{"error body", anthropicShape, false, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, tokens{}, false},
		{"empty", openaiShape, false, ``, tokens{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, and one byte at a time: lines split anywhere.
			for _, step := range []int{len(tc.body) + 1, 1, 7} {
				m := &usageMeter{api: tc.api, sse: tc.sse}
				for i := 0; i < len(tc.body); i += step {
					m.write([]byte(tc.body[i:min(i+step, len(tc.body))]))
				}
				got, ok := m.result()
				assert.Equal(t, tc.wantOK, ok, "step %d", step)
				assert.Equal(t, tc.want, got, "step %d", step)
			}
		})
	}
}

func TestUsageMeterBoundsWhatItHolds(t *testing.T) {
	m := &usageMeter{api: anthropicShape, sse: true}
	long := `data: {"type":"content_block_delta","delta":{"text":"` + strings.Repeat("x", 2*maxSSELine) + `"}}` + "\n\n"
	for i := 0; i < len(long); i += 4096 {
		m.write([]byte(long[i:min(i+4096, len(long))]))
		assert.LessOrEqual(t, cap(m.line), 2*maxSSELine)
	}
	m.write([]byte(sse(`{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`)))
	got, ok := m.result()
	require.True(t, ok, "a line after a skipped long one is read")
	assert.Equal(t, tokens{in: 5, out: 1}, got)

	j := &usageMeter{api: openaiShape}
	j.write([]byte(`{"choices":[{"message":{"content":"`))
	j.write([]byte(strings.Repeat("x", maxJSONBody)))
	j.write([]byte(`"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	assert.Nil(t, j.body, "an answer past the cap is not held")
	_, ok = j.result()
	assert.False(t, ok)
}

// book is a UsageBook in memory.
type book struct {
	mu     sync.Mutex
	use    map[string]domain.Usage // group/day
	models map[string]int          // answers per model
	adds   int
	err    error
}

func newBook() *book { return &book{use: map[string]domain.Usage{}, models: map[string]int{}} }

func (b *book) AddUsage(_ context.Context, group, model, day string, in, out int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.models[model]++
	u := b.use[group+"/"+day]
	u.Group, u.Day = group, day
	u.Input += in
	u.Output += out
	u.Requests++
	b.use[group+"/"+day] = u
	b.adds++
	return nil
}

func (b *book) UsageOn(_ context.Context, group, day string) (domain.Usage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return domain.Usage{}, b.err
	}
	return b.use[group+"/"+day], nil
}

func (b *book) get(group, day string) domain.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.use[group+"/"+day]
}

// usageProvider answers both APIs, streamed or not, with fixed usage, and
// counts the requests it got.
func usageProvider(t *testing.T) (*httptest.Server, func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		var req struct {
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		switch {
		case r.URL.Path == "/v1/messages" && req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, anthropicStream)
		case r.URL.Path == "/v1/messages":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, messageJSON) // 3 in, 4 out
		case req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
				_, _ = io.WriteString(w, "data: "+`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
				return
			}
			_, _ = io.WriteString(w, "data: "+`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":null}`+"\n\n"+
				"data: "+`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":70,"completion_tokens":8,"total_tokens":78}}`+"\n\ndata: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func TestProxyRecordsUsageOfEveryAnswer(t *testing.T) {
	up, _ := usageProvider(t)
	b := newBook()
	loc := time.FixedZone("X", 5*3600)
	now := time.Date(2026, 5, 4, 20, 0, 0, 0, time.UTC) // already the 5th in X
	_, hc := listen(t, Config{
		Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, OpenAI: Upstream{BaseURL: up.URL + "/v1", APIKey: hostKey},
		Model: hostModel, Usage: b, TZ: loc, Now: func() time.Time { return now },
	})
	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithBaseURL("http://clawpen"), aoption.WithHTTPClient(hc), aoption.WithAPIKey("x"), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	msg, err := ac.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "hello from upstream", msg.Content[0].Text, "the answer passes unchanged")
	s := ac.Messages.NewStreaming(ctx, params)
	acc := anthropic.Message{}
	for s.Next() {
		require.NoError(t, acc.Accumulate(s.Current()))
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	assert.Contains(t, acc.Content[0].Text, "message_delta", "the model's text passes as it came")

	oc := openai.NewClient(ooption.WithBaseURL("http://clawpen/v1/"), ooption.WithHTTPClient(hc), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	oparams := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	res, err := oc.Chat.Completions.New(ctx, oparams)
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Choices[0].Message.Content)
	ostream := oc.Chat.Completions.NewStreaming(ctx, oparams)
	text := ""
	for ostream.Next() {
		if c := ostream.Current(); len(c.Choices) > 0 {
			text += c.Choices[0].Delta.Content
		}
	}
	require.NoError(t, ostream.Err(), "the usage chunk the host asked for does not trouble the SDK")
	require.NoError(t, ostream.Close())
	assert.Equal(t, "hi", text)

	// The last answer is recorded when its body ends, which the client
	// may see a moment before.
	require.Eventually(t, func() bool { return b.get("team", "2026-05-05").Requests == 4 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, domain.Usage{Group: "team", Day: "2026-05-05", Input: 3 + 1110 + 11 + 70, Output: 4 + 42 + 7 + 8, Requests: 4},
		b.get("team", "2026-05-05"), "per group and day in TZ; cache reads and writes as input")
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Equal(t, map[string]int{hostModel: 4}, b.models, "recorded under the model the host pinned, not the one asked for")
}

func TestBudgetReachedRefusesWithoutCallingTheProvider(t *testing.T) {
	up, calls := usageProvider(t)
	b := newBook()
	day := domain.Day(time.Now(), time.Local)
	var audited []domain.AuditEntry
	var mu sync.Mutex
	s, hc := listen(t, Config{
		Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, OpenAI: Upstream{BaseURL: up.URL + "/v1", APIKey: hostKey},
		Model: hostModel, Usage: b, Profile: domain.Profile{Name: "small", DailyTokens: 10},
		Audit: func(_ context.Context, e domain.AuditEntry) error {
			mu.Lock()
			defer mu.Unlock()
			audited = append(audited, e)
			return nil
		},
	})
	post := func(path, body string) *http.Response {
		resp, err := hc.Post("http://clawpen"+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		return resp
	}
	resp := post("/v1/messages", minimalMessages) // 3 + 4 tokens: 7 of 10
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return b.get("team", day).Total() == 7 }, 5*time.Second, 10*time.Millisecond)
	_, refused := s.BudgetRefused()
	assert.False(t, refused)

	resp = post("/v1/messages", minimalMessages) // under the budget still: goes, and goes over
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return b.get("team", day).Total() == 14 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, calls())

	for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
		body := minimalMessages
		if path == "/v1/chat/completions" {
			body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		}
		resp = post(path, body)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		assert.Empty(t, resp.Header.Get("Retry-After"), "nothing to wait for until tomorrow")
		assert.Equal(t, map[string]string{"error": "denied: daily token budget of 10 reached"}, decodeJSON(t, resp))
	}
	assert.Equal(t, 2, calls(), "the provider was not called once the budget was reached")
	got, refused := s.BudgetRefused()
	require.True(t, refused)
	assert.Equal(t, BudgetRefusal{Day: day, Budget: 10, Used: 14}, got)

	// The SDKs do not retry it.
	ac := anthropic.NewClient(aoption.WithBaseURL("http://clawpen"), aoption.WithHTTPClient(hc), aoption.WithAPIKey("x"), aoption.WithMaxRetries(3))
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "429")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, audited, 3, "every refusal audited, one request each: the SDK did not retry")
	for _, e := range audited {
		assert.Equal(t, "deny", e.Decision)
		assert.Equal(t, "team", e.Group)
		assert.Equal(t, "daily token budget of 10 reached", e.Reason)
	}
}

func TestBudgetFailsClosedWhenUsageCannotBeRead(t *testing.T) {
	up, calls := usageProvider(t)
	b := newBook()
	b.err = fmt.Errorf("disk on fire")
	for _, book := range []UsageBook{b, nil} {
		_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel, Usage: book,
			Profile: domain.Profile{Name: "small", DailyTokens: 10}})
		resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(minimalMessages))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		resp.Body.Close()
	}
	assert.Zero(t, calls())
}

func TestNoBudgetNoLimit(t *testing.T) {
	up, calls := usageProvider(t)
	b := newBook()
	require.NoError(t, b.AddUsage(context.Background(), "team", hostModel, domain.Day(time.Now(), time.Local), 1<<40, 0))
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel, Usage: b})
	resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(minimalMessages))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1, calls())
}
