package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
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
func NewModel(provider string, httpClient *http.Client, stream bool) (Model, error) {
	switch provider {
	case "", "anthropic":
		c := anthropic.NewClient(
			aoption.WithoutEnvironmentDefaults(), // no key, no ANTHROPIC_* env: the host is the only way out
			aoption.WithBaseURL(hostBaseURL),
			aoption.WithHTTPClient(httpClient),
			aoption.WithMaxRetries(2),
		)
		return &anthropicModel{client: c, stream: stream}, nil
	case "openai":
		c := openai.NewClient(
			ooption.WithBaseURL(hostBaseURL+"/v1/"),
			ooption.WithHTTPClient(httpClient),
			// No key leaves the sandbox, even if OPENAI_API_KEY leaked into its env: the host adds it.
			ooption.WithHeaderDel("Authorization"),
			ooption.WithMaxRetries(2),
		)
		return &openaiModel{client: c}, nil
	default:
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
}

type anthropicModel struct {
	client anthropic.Client
	stream bool
}

func (m *anthropicModel) Complete(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
		Messages:  toAnthropicMessages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: t.Properties, Required: t.Required},
		}})
	}

	var msg *anthropic.Message
	if m.stream {
		s := m.client.Messages.NewStreaming(ctx, params)
		defer s.Close()
		acc := &anthropic.Message{}
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
			}
		}
		if err := s.Err(); err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic stream: %w", err)
		}
		msg = acc
	} else {
		var err error
		msg, err = m.client.Messages.New(ctx, params)
		if err != nil {
			return ModelResponse{}, fmt.Errorf("anthropic: %w", err)
		}
	}

	resp := ModelResponse{StopReason: string(msg.StopReason)}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			resp.Content = append(resp.Content, Block{Type: BlockText, Text: b.Text})
		case "tool_use":
			resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: safeJSON(b.Input)})
		}
	}
	return resp, nil
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

func toAnthropicMessages(msgs []Message) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, 0, len(msgs))
	for _, m := range msgs {
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text != "" { // the API refuses empty text blocks
					blocks = append(blocks, anthropic.NewTextBlock(b.Text))
				}
			case BlockToolUse:
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, objectOrEmpty(b.Input), b.Name))
			case BlockToolResult:
				blocks = append(blocks, anthropic.NewToolResultBlock(b.ToolUseID, b.Text, b.IsError))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if m.Role == RoleAssistant {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
	}
	return out
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
		schema := shared.FunctionParameters{"type": "object", "properties": t.Properties}
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		params.Tools = append(params.Tools, openai.ChatCompletionToolParam{Function: shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  schema,
		}})
	}
	res, err := m.client.Chat.Completions.New(ctx, params)
	if err != nil {
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
		if t := m.text(); t != "" {
			out = append(out, openai.UserMessage(t))
		}
	}
	return out
}
