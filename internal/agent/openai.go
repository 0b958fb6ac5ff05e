package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
)

// The OpenAI-compatible Chat Completions request and stream chunks in the
// fields the agent uses; the body is the openai-go SDK's, key for key
// (TestOpenAIBodyMatchesSDK).

type openaiBodyJSON struct {
	Messages  []openaiMessageJSON `json:"messages,omitzero"` // absent when nil, as the SDK sends it
	Model     string              `json:"model"`
	MaxTokens int                 `json:"max_tokens"`
	Tools     []openaiToolJSON    `json:"tools,omitempty"`
	Stream    bool                `json:"stream"`
}

// openaiMessageJSON is a message of any role; Content is a string or a
// list of parts.
type openaiMessageJSON struct {
	Content    any                  `json:"content,omitempty"`
	Role       string               `json:"role"`
	ToolCalls  []openaiToolCallJSON `json:"tool_calls,omitempty"`
	ToolCallID string               `json:"tool_call_id,omitempty"`
}

type openaiPartJSON struct {
	Text     *string             `json:"text,omitempty"`
	Type     string              `json:"type"`
	ImageURL *openaiImageURLJSON `json:"image_url,omitempty"`
}

type openaiImageURLJSON struct {
	URL string `json:"url"`
}

type openaiToolCallJSON struct {
	ID       string             `json:"id"`
	Function openaiFunctionJSON `json:"function"`
	Type     string             `json:"type"`
}

type openaiFunctionJSON struct {
	Arguments string `json:"arguments"`
	Name      string `json:"name"`
}

type openaiToolJSON struct {
	Function openaiToolFunctionJSON `json:"function"`
	Type     string                 `json:"type"`
}

type openaiToolFunctionJSON struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// openaiBody is req as a streaming Chat Completions request.
func openaiBody(req ModelRequest) ([]byte, error) {
	body := openaiBodyJSON{
		Messages:  toOpenAIMessages(req.System, req.Messages),
		Model:     req.Model,
		MaxTokens: req.MaxTokens,
		Stream:    true,
	}
	for _, t := range req.Tools {
		schema := maps.Clone(t.Extra)
		if schema == nil {
			schema = map[string]any{}
		}
		schema["type"], schema["properties"] = "object", t.Properties
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		body.Tools = append(body.Tools, openaiToolJSON{Type: "function",
			Function: openaiToolFunctionJSON{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode openai request: %w", err)
	}
	return b, nil
}

func toOpenAIMessages(system string, msgs []Message) []openaiMessageJSON {
	var out []openaiMessageJSON
	if system != "" {
		out = append(out, openaiMessageJSON{Role: "system", Content: system})
	}
	for _, m := range msgs {
		if m.Role == RoleAssistant {
			am := openaiMessageJSON{Role: RoleAssistant}
			if t := m.text(); t != "" {
				am.Content = t
			}
			for _, b := range m.toolUses() {
				am.ToolCalls = append(am.ToolCalls, openaiToolCallJSON{ID: b.ID, Type: "function",
					Function: openaiFunctionJSON{Name: b.Name, Arguments: string(b.Input)}})
			}
			if am.Content != nil || len(am.ToolCalls) > 0 {
				out = append(out, am)
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
				out = append(out, openaiMessageJSON{Role: "tool", Content: text, ToolCallID: b.ToolUseID})
			}
		}
		if um, ok := openAIUser(m); ok {
			out = append(out, um)
		}
	}
	return out
}

// openAIUser is a user message of text and images (as data URLs).
func openAIUser(m Message) (openaiMessageJSON, bool) {
	var parts []openaiPartJSON
	text := m.text()
	if text != "" {
		parts = append(parts, openaiPartJSON{Type: "text", Text: &text})
	}
	images := 0
	for _, b := range m.Content {
		if b.Type == BlockImage && len(b.Data) > 0 {
			url := "data:" + b.MediaType + ";base64," + base64.StdEncoding.EncodeToString(b.Data)
			parts = append(parts, openaiPartJSON{Type: "image_url", ImageURL: &openaiImageURLJSON{URL: url}})
			images++
		}
	}
	switch {
	case len(parts) == 0:
		return openaiMessageJSON{}, false
	case images == 0:
		return openaiMessageJSON{Role: RoleUser, Content: text}, true
	}
	return openaiMessageJSON{Role: RoleUser, Content: parts}, true
}

// openaiChunk is one streamed chunk, in the fields the agent reads; Error
// is set when the server failed after the answer had begun.
type openaiChunk struct {
	Error   json.RawMessage `json:"error"`
	ID      string          `json:"id"`
	Choices []struct {
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
		Delta        struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

// maxOpenAIIndex bounds the choice and tool-call indexes a chunk may name:
// the answer grows to the highest index, so an unbounded one is memory the
// provider (or a server in its place) picks.
const maxOpenAIIndex = 255

type openaiCall struct{ id, name, args string }

// openaiAnswer accumulates the stream as the SDK's
// ChatCompletionAccumulator does, for the first choice.
type openaiAnswer struct {
	id           string
	content      string
	calls        []openaiCall
	finishReason string
	choice       bool // a first choice was seen
}

func (a *openaiAnswer) add(c *openaiChunk) error {
	if a.id == "" {
		a.id = c.ID
	} else if a.id != c.ID {
		return fmt.Errorf("a chunk does not continue the answer")
	}
	for _, ch := range c.Choices {
		if ch.Index < 0 || ch.Index > maxOpenAIIndex {
			return fmt.Errorf("choice index %d out of range", ch.Index)
		}
		if ch.Index != 0 {
			continue
		}
		a.choice = true
		a.finishReason = ch.FinishReason
		a.content += ch.Delta.Content
		for _, d := range ch.Delta.ToolCalls {
			if d.Index < 0 || d.Index > maxOpenAIIndex {
				return fmt.Errorf("tool call index %d out of range", d.Index)
			}
			for len(a.calls) <= d.Index {
				a.calls = append(a.calls, openaiCall{})
			}
			tc := &a.calls[d.Index]
			if d.ID != "" {
				tc.id = d.ID
			}
			tc.name += d.Function.Name
			tc.args += d.Function.Arguments
		}
	}
	return nil
}

func (a *openaiAnswer) response() ModelResponse {
	resp := ModelResponse{StopReason: a.finishReason}
	if a.content != "" {
		resp.Content = append(resp.Content, Block{Type: BlockText, Text: a.content})
	}
	for _, tc := range a.calls {
		resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: tc.id, Name: tc.name, Input: safeJSON([]byte(tc.args))})
	}
	if len(a.calls) > 0 {
		resp.StopReason = "tool_use"
	}
	return resp
}

type openaiModel struct {
	api apiClient
}

func (m *openaiModel) Complete(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	body, err := openaiBody(req)
	if err != nil {
		return ModelResponse{}, err
	}
	res, err := m.api.post(ctx, "chat/completions", body)
	if err != nil {
		return ModelResponse{}, fmt.Errorf("openai: %w", err)
	}
	defer res.Body.Close()
	events := newSSEReader(res.Body)
	var ans openaiAnswer
	for {
		sse, err := events.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ModelResponse{}, fmt.Errorf("openai: %w", err)
		}
		if bytes.HasPrefix(sse.Data, []byte("[DONE]")) {
			break
		}
		var c openaiChunk
		err = decodeEvent(sse.Data, &c)
		if len(c.Error) > 0 {
			return ModelResponse{}, fmt.Errorf("openai: %w", streamError(c.Error))
		}
		if err != nil {
			return ModelResponse{}, fmt.Errorf("openai: %w", err)
		}
		if err := ans.add(&c); err != nil {
			return ModelResponse{}, fmt.Errorf("openai stream: %w", err)
		}
		if req.OnText != nil && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			req.OnText(ans.content)
		}
	}
	if !ans.choice {
		return ModelResponse{}, fmt.Errorf("openai: answer has no choices")
	}
	return ans.response(), nil
}
