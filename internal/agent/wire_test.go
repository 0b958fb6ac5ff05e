package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent's own client against the providers' SDKs, which it replaced:
// the same conversation gives the same requests on the wire (method, path,
// media types, body), the same number of tries for the same answers, and
// the same outcome.

// sdkOpenAIParams is the request as the openai-go SDK's types build it.
func sdkOpenAIParams(req ModelRequest) openai.ChatCompletionNewParams {
	params := openai.ChatCompletionNewParams{
		Model:     openai.ChatModel(req.Model),
		MaxTokens: openai.Int(int64(req.MaxTokens)),
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			var am openai.ChatCompletionAssistantMessageParam
			if t := m.text(); t != "" {
				am.Content.OfString = openai.String(t)
			}
			for _, b := range m.toolUses() {
				am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallParam{
					ID:       b.ID,
					Function: openai.ChatCompletionMessageToolCallFunctionParam{Name: b.Name, Arguments: string(b.Input)},
				})
			}
			if am.Content.OfString.Valid() || len(am.ToolCalls) > 0 {
				params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
			}
			continue
		}
		for _, b := range m.Content {
			if b.Type == BlockToolResult {
				text := b.Text
				if b.IsError {
					text = "error: " + text
				}
				params.Messages = append(params.Messages, openai.ToolMessage(text, b.ToolUseID))
			}
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		if t := m.text(); t != "" {
			parts = append(parts, openai.TextContentPart(t))
		}
		images := 0
		for _, b := range m.Content {
			if b.Type == BlockImage && len(b.Data) > 0 {
				url := "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
				images++
			}
		}
		switch {
		case len(parts) == 0:
		case images == 0:
			params.Messages = append(params.Messages, openai.UserMessage(m.text()))
		default:
			params.Messages = append(params.Messages, openai.UserMessage(parts))
		}
	}
	for _, t := range req.Tools {
		schema := shared.FunctionParameters{}
		maps.Copy(schema, t.Extra)
		schema["type"], schema["properties"] = "object", t.Properties
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		params.Tools = append(params.Tools, openai.ChatCompletionToolParam{Function: shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: schema,
		}})
	}
	return params
}

// wireConversation has every kind of block and tool the agent sends.
func wireConversation() ModelRequest {
	return ModelRequest{Model: "test-model", MaxTokens: 8192, System: "You are Andy.\n<x>", Messages: []Message{
		{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "hi <b>&</b>"}, {Type: BlockText, Text: ""},
			{Type: BlockImage, MediaType: "image/png", Data: []byte{1, 2, 3}}, {Type: BlockImage, MediaType: "image/png"}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockText, Text: "ok"},
			{Type: BlockToolUse, ID: "t1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}}},
		{Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: "t1", Text: "out"},
			{Type: BlockToolResult, ToolUseID: "t2", Text: "", IsError: true}, {Type: BlockText, Text: "and?"}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockText, Text: ""}}},
		{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "again \u2028 é"}}},
	}, Tools: []ToolDef{
		{Name: "bash", Description: "run", Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}},
		{Name: "nothing"},
		{Name: "web_search", Description: "search", Properties: map[string]any{"q": map[string]any{"type": "string"}},
			Extra: map[string]any{"additionalProperties": false}},
	}}
}

func TestOpenAIBodyMatchesSDK(t *testing.T) {
	for name, req := range map[string]ModelRequest{
		"full":  wireConversation(),
		"empty": {Model: "m", MaxTokens: 1},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(sdkOpenAIParams(req))
			require.NoError(t, err)
			var wantObj map[string]any
			require.NoError(t, json.Unmarshal(want, &wantObj))
			wantObj["stream"] = true // what the SDK's NewStreaming adds
			got, err := openaiBody(req)
			require.NoError(t, err)
			var gotObj map[string]any
			require.NoError(t, json.Unmarshal(got, &gotObj))
			wantJSON, _ := json.MarshalIndent(wantObj, "", " ")
			gotJSON, _ := json.MarshalIndent(gotObj, "", " ")
			assert.Equal(t, string(wantJSON), string(gotJSON))
		})
	}
}

// answer is one canned answer of the fake API; err is a connection error.
type answer struct {
	status int
	header http.Header
	body   string
	err    bool
}

// attempt is what one try put on the wire.
type attempt struct {
	Method, Path, Accept, ContentType string
	Body                              map[string]any
}

// scripted answers each try with the next of its answers and records it.
type scripted struct {
	mu       sync.Mutex
	answers  []answer
	attempts []attempt
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := attempt{Method: r.Method, Path: r.URL.Path, Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type")}
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &a.Body)
	}
	s.attempts = append(s.attempts, a)
	if len(s.answers) == 0 {
		return nil, errors.New("no more answers")
	}
	ans := s.answers[0]
	s.answers = s.answers[1:]
	if ans.err {
		return nil, errors.New("connection reset")
	}
	h := ans.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/event-stream")
	}
	return &http.Response{StatusCode: ans.status, Header: h, Request: r, ContentLength: int64(len(ans.body)),
		Body: io.NopCloser(strings.NewReader(ans.body))}, nil
}

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		typ, data, _ := strings.Cut(e, "|")
		if typ != "" {
			b.WriteString("event: " + typ + "\n")
		}
		b.WriteString("data: " + data + "\n\n")
	}
	return b.String()
}

var (
	anthropicOK = sse(
		`message_start|{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"test-model","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":0}}}`,
		`ping|{"type":"ping"}`,
		`content_block_start|{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`content_block_delta|{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		`content_block_delta|{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
		`content_block_stop|{"type":"content_block_stop","index":0}`,
		`content_block_start|{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"bash","input":{}}}`,
		`content_block_delta|{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}`,
		`content_block_delta|{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}`,
		`content_block_stop|{"type":"content_block_stop","index":1}`,
		`message_delta|{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`,
		`message_stop|{"type":"message_stop"}`)
	anthropicStreamErr = sse(
		`message_start|{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[]}}`,
		`error|{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	openaiOK = sse(
		`|{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
		`|{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
		`|{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call1","type":"function","function":{"name":"bash","arguments":"{\"command\":"}}]},"finish_reason":null}]}`,
		`|{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]},"finish_reason":"tool_calls"}]}`,
		`|[DONE]`)
	openaiStreamErr = sse(
		`|{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`|{"error":{"message":"server overloaded","type":"server_error"}}`)
)

// soon asks for a retry in 1 ms, so the tries do not wait out the back-off.
var soon = http.Header{"Retry-After-Ms": {"1"}}

func errBody(status int, h http.Header) answer {
	if h == nil {
		h = http.Header{}
	}
	h = h.Clone()
	h.Set("Content-Type", "application/json")
	return answer{status: status, header: h, body: `{"type":"error","error":{"type":"x","message":"nope"}}`}
}

func TestWireMatchesSDKs(t *testing.T) {
	scripts := map[string]func(ok, streamErr string) []answer{
		"answered":             func(ok, _ string) []answer { return []answer{{status: 200, body: ok}} },
		"500 then answered":    func(ok, _ string) []answer { return []answer{errBody(500, soon), {status: 200, body: ok}} },
		"back-off then answer": func(ok, _ string) []answer { return []answer{errBody(503, nil), {status: 200, body: ok}} },
		"connection error":     func(ok, _ string) []answer { return []answer{{err: true}, {status: 200, body: ok}} },
		"429 three times": func(ok, _ string) []answer {
			return []answer{errBody(429, soon), errBody(429, soon), errBody(429, soon), {status: 200, body: ok}}
		},
		"408 and 409 retried": func(ok, _ string) []answer {
			return []answer{errBody(408, soon), errBody(409, soon), {status: 200, body: ok}}
		},
		"400 not retried": func(ok, _ string) []answer { return []answer{errBody(400, soon), {status: 200, body: ok}} },
		"404 not retried": func(ok, _ string) []answer { return []answer{errBody(404, soon), {status: 200, body: ok}} },
		"should-retry says no": func(ok, _ string) []answer {
			return []answer{errBody(500, http.Header{"X-Should-Retry": {"false"}, "Retry-After-Ms": {"1"}}), {status: 200, body: ok}}
		},
		"should-retry says yes": func(ok, _ string) []answer {
			return []answer{errBody(400, http.Header{"X-Should-Retry": {"true"}, "Retry-After-Ms": {"1"}}), {status: 200, body: ok}}
		},
		"error in the stream": func(_, streamErr string) []answer { return []answer{{status: 200, body: streamErr}} },
	}
	providers := map[string]struct {
		ok, streamErr string
		sdk           func(context.Context, *http.Client, ModelRequest) (string, error)
	}{
		"anthropic": {anthropicOK, anthropicStreamErr, sdkAnthropic},
		"openai":    {openaiOK, openaiStreamErr, sdkOpenAI},
	}
	for pname, p := range providers {
		for sname, script := range scripts {
			t.Run(pname+"/"+sname, func(t *testing.T) {
				req := wireConversation()
				theirs := &scripted{answers: script(p.ok, p.streamErr)}
				wantText, wantErr := p.sdk(context.Background(), &http.Client{Transport: theirs}, req)

				ours := &scripted{answers: script(p.ok, p.streamErr)}
				model, err := NewModel(pname, &http.Client{Transport: ours})
				require.NoError(t, err)
				resp, gotErr := model.Complete(context.Background(), req)

				require.Equal(t, len(theirs.attempts), len(ours.attempts), "tries")
				for i := range theirs.attempts {
					assert.Equal(t, theirs.attempts[i], ours.attempts[i], "try %d", i)
				}
				require.Equal(t, wantErr != nil, gotErr != nil, "outcome: SDK %v, agent %v", wantErr, gotErr)
				if wantErr == nil {
					assert.Equal(t, wantText, answerSummary(resp))
				}
			})
		}
	}
}

// answerSummary is a response as text, tool calls and stop reason.
func answerSummary(r ModelResponse) string {
	var b strings.Builder
	for _, c := range r.Content {
		switch c.Type {
		case BlockText:
			b.WriteString("text:" + c.Text + "\n")
		case BlockToolUse:
			b.WriteString("tool:" + c.ID + ":" + c.Name + ":" + string(c.Input) + "\n")
		}
	}
	b.WriteString("stop:" + r.StopReason)
	return b.String()
}

// sdkAnthropic is the request as the agent made it with the Anthropic SDK.
func sdkAnthropic(ctx context.Context, hc *http.Client, req ModelRequest) (string, error) {
	c := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(hostBaseURL),
		aoption.WithHTTPClient(hc), aoption.WithMaxRetries(2))
	s := c.Messages.NewStreaming(ctx, sdkParams(req))
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return "", err
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	var r ModelResponse
	r.StopReason = string(msg.StopReason)
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			r.Content = append(r.Content, Block{Type: BlockText, Text: b.Text})
		case "tool_use":
			r.Content = append(r.Content, Block{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return answerSummary(r), nil
}

// sdkOpenAI is the request as the agent made it with the openai-go SDK.
func sdkOpenAI(ctx context.Context, hc *http.Client, req ModelRequest) (string, error) {
	c := openai.NewClient(ooption.WithBaseURL(hostBaseURL+"/v1/"), ooption.WithHTTPClient(hc),
		ooption.WithHeaderDel("Authorization"), ooption.WithMaxRetries(2))
	s := c.Chat.Completions.NewStreaming(ctx, sdkOpenAIParams(req))
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			return "", errors.New("chunk does not continue the answer")
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	if len(acc.Choices) == 0 {
		return "", errors.New("no choices")
	}
	ch := acc.Choices[0]
	r := ModelResponse{StopReason: ch.FinishReason}
	if ch.Message.Content != "" {
		r.Content = append(r.Content, Block{Type: BlockText, Text: ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		r.Content = append(r.Content, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
	}
	if len(ch.Message.ToolCalls) > 0 {
		r.StopReason = "tool_use"
	}
	return answerSummary(r), nil
}

// Whatever a provider (or a server in its place) streams, the agent ends
// the call with an answer or an error, never a panic.
func FuzzModelStream(f *testing.F) {
	for _, s := range []string{anthropicOK, anthropicStreamErr, openaiOK, openaiStreamErr,
		"data: {\"id\":\"c\",\"choices\":[{\"index\":99999999,\"delta\":{}}]}\n\n",
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7}\n\n", ":\n\ndata\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, provider := range []string{"anthropic", "openai"} {
			tr := &scripted{answers: []answer{{status: 200, body: body}}}
			model, err := NewModel(provider, &http.Client{Transport: tr})
			require.NoError(t, err)
			_, _ = model.Complete(context.Background(), ModelRequest{Model: "m", MaxTokens: 1,
				OnText: func(string) {}})
		}
	})
}
