package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
)

// hostBaseURL is the base URL of every request through the host socket; the
// transport dials the socket whatever the host part says.
const hostBaseURL = "http://clawpen"

// socketClient is an HTTP client whose every connection is the unix socket at path.
func socketClient(path string) *http.Client {
	dialer := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:      4,
		ForceAttemptHTTP2: false,
	}}
}

// NewModel returns the provider named by the job ("" means anthropic), talking
// through httpClient. The agent holds no key: the host adds it.
func NewModel(provider string, httpClient *http.Client) (Model, error) {
	switch provider {
	case "", "anthropic":
		c := anthropic.NewClient(
			aoption.WithoutEnvironmentDefaults(), // no key, no ANTHROPIC_* env: the host is the only way out
			aoption.WithBaseURL(hostBaseURL),
			aoption.WithHTTPClient(httpClient),
			aoption.WithMaxRetries(2),
			aoption.WithMiddleware(noRetryWhenDenied),
		)
		return &anthropicModel{client: c}, nil
	case "openai":
		c := openai.NewClient(
			ooption.WithBaseURL(hostBaseURL+"/v1/"),
			ooption.WithHTTPClient(httpClient),
			// No key leaves the sandbox, even if OPENAI_API_KEY leaked into its env: the host adds it.
			ooption.WithHeaderDel("Authorization"),
			ooption.WithMaxRetries(2),
			ooption.WithMiddleware(noRetryWhenDenied),
		)
		return &openaiModel{client: c}, nil
	default:
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
}

// maxDeniedPeek bounds what is read of a 429's body to see whether the
// host refused it: the host's refusals are one short JSON line.
const maxDeniedPeek = 4 << 10

// noRetryWhenDenied stops the SDKs' retries of a 429 the host itself
// answered with a refusal ("denied: …") without saying when to come back,
// such as the daily token budget: the same request gets the same answer,
// so the run ends at once. A refusal with Retry-After (the socket's request
// rate) and a provider's own 429 are retried as before: waiting cures them.
func noRetryWhenDenied(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := next(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		resp.Header.Get("Retry-After") != "" || resp.Header.Get("Retry-After-Ms") != "" {
		return resp, err
	}
	peek, rerr := io.ReadAll(io.LimitReader(resp.Body, maxDeniedPeek))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
	if rerr != nil {
		return resp, nil
	}
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(peek, &v) == nil && strings.HasPrefix(v.Error, "denied:") {
		resp.Header.Set("X-Should-Retry", "false")
	}
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

type anthropicModel struct {
	client anthropic.Client
}

func (m *anthropicModel) Complete(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	body, err := anthropicBody(req)
	if err != nil {
		return ModelResponse{}, err
	}
	// Always streamed: the answer shows as a draft while it is written, and
	// the API refuses a non-streaming call that may run long. The SDK sends
	// the body as it is and frames the stream (its error events included).
	var raw *http.Response
	err = m.client.Post(ctx, "v1/messages", body, &raw)
	s := ssestream.NewStream[anthropicEvent](ssestream.NewDecoder(raw), err)
	defer s.Close()
	var ans anthropicAnswer
	for s.Next() {
		ev := s.Current()
		if err := ans.add(&ev); err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
		}
		if req.OnText != nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			req.OnText(ans.text())
		}
	}
	if err := s.Err(); err != nil {
		return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
	}
	return ans.response(), nil
}

// objectOrEmpty is raw when it is a JSON object, else {}: the API accepts
// nothing else as a tool_use input, even one the model itself produced badly.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return raw
}

type openaiModel struct {
	client openai.Client
}

func (m *openaiModel) Complete(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	params := openai.ChatCompletionNewParams{
		Model:     openai.ChatModel(req.Model),
		MaxTokens: openai.Int(int64(req.MaxTokens)),
		Messages:  toOpenAIMessages(req.System, req.Messages),
	}
	for _, t := range req.Tools {
		schema := shared.FunctionParameters{}
		maps.Copy(schema, t.Extra)
		schema["type"], schema["properties"] = "object", t.Properties
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		params.Tools = append(params.Tools, openai.ChatCompletionToolParam{Function: shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  schema,
		}})
	}
	s := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var res openai.ChatCompletionAccumulator
	for s.Next() {
		chunk := s.Current()
		if !res.AddChunk(chunk) {
			return ModelResponse{}, fmt.Errorf("openai stream: a chunk does not continue the answer")
		}
		if req.OnText != nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			req.OnText(res.Choices[0].Message.Content)
		}
	}
	if err := s.Err(); err != nil {
		return ModelResponse{}, fmt.Errorf("openai: %w", err)
	}
	if len(res.Choices) == 0 {
		return ModelResponse{}, fmt.Errorf("openai: answer has no choices")
	}
	ch := res.Choices[0]
	resp := ModelResponse{StopReason: ch.FinishReason}
	if ch.Message.Content != "" {
		resp.Content = append(resp.Content, Block{Type: BlockText, Text: ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: safeJSON([]byte(tc.Function.Arguments))})
	}
	if len(ch.Message.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	}
	return resp, nil
}

func toOpenAIMessages(system string, msgs []Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range msgs {
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
				out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
			}
			continue
		}
		// Tool answers first: they must directly follow the assistant's tool calls.
		for _, b := range m.Content {
			if b.Type == BlockToolResult {
				text := b.Text
				if b.IsError {
					text = "error: " + text
				}
				out = append(out, openai.ToolMessage(text, b.ToolUseID))
			}
		}
		if um, ok := openAIUser(m); ok {
			out = append(out, um)
		}
	}
	return out
}
