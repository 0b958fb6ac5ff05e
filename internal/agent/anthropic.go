package agent

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
)

// The Anthropic request body and stream events in the few fields the agent
// uses (api.go says why the agent has its own client). The body is the
// SDK's, key for key (TestAnthropicBodyMatchesSDK).

type anthropicBodyJSON struct {
	MaxTokens int                    `json:"max_tokens"`
	Messages  []anthropicMessageJSON `json:"messages"`
	Model     string                 `json:"model"`
	System    []anthropicBlockJSON   `json:"system,omitempty"`
	Tools     []anthropicToolJSON    `json:"tools,omitempty"`
	Stream    bool                   `json:"stream"`
}

type anthropicMessageJSON struct {
	Content []anthropicBlockJSON `json:"content"`
	Role    string               `json:"role"`
}

// anthropicBlockJSON is one content block of any type the agent sends.
type anthropicBlockJSON struct {
	Type      string               `json:"type"`
	Text      *string              `json:"text,omitempty"` // text: present even when empty
	ID        string               `json:"id,omitempty"`
	Name      string               `json:"name,omitempty"`
	Input     json.RawMessage      `json:"input,omitempty"`
	ToolUseID string               `json:"tool_use_id,omitempty"`
	IsError   *bool                `json:"is_error,omitempty"`
	Content   []anthropicBlockJSON `json:"content,omitempty"`
	Source    *anthropicSourceJSON `json:"source,omitempty"`
}

type anthropicSourceJSON struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
	Type      string `json:"type"`
}

type anthropicToolJSON struct {
	InputSchema map[string]any `json:"input_schema"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
}

func textBlockJSON(s string) anthropicBlockJSON {
	return anthropicBlockJSON{Type: BlockText, Text: &s}
}

// anthropicBody is req as a streaming Messages API request.
func anthropicBody(req ModelRequest) ([]byte, error) {
	body := anthropicBodyJSON{
		MaxTokens: req.MaxTokens,
		Messages:  toAnthropicMessages(req.Messages),
		Model:     req.Model,
		Stream:    true,
	}
	if req.System != "" {
		body.System = []anthropicBlockJSON{textBlockJSON(req.System)}
	}
	for _, t := range req.Tools {
		schema := maps.Clone(t.Extra)
		if schema == nil {
			schema = map[string]any{}
		}
		schema["type"], schema["properties"] = "object", t.Properties // nil is null, as the SDK sends it
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		body.Tools = append(body.Tools, anthropicToolJSON{InputSchema: schema, Name: t.Name, Description: t.Description})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode anthropic request: %w", err)
	}
	return b, nil
}

func toAnthropicMessages(msgs []Message) []anthropicMessageJSON {
	out := make([]anthropicMessageJSON, 0, len(msgs))
	for _, m := range msgs {
		var blocks []anthropicBlockJSON
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text != "" { // the API refuses empty text blocks
					blocks = append(blocks, textBlockJSON(b.Text))
				}
			case BlockToolUse:
				blocks = append(blocks, anthropicBlockJSON{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: objectOrEmpty(b.Input)})
			case BlockToolResult:
				isErr := b.IsError
				blocks = append(blocks, anthropicBlockJSON{Type: BlockToolResult, ToolUseID: b.ToolUseID, IsError: &isErr,
					Content: []anthropicBlockJSON{textBlockJSON(b.Text)}})
			case BlockImage:
				if len(b.Data) > 0 { // none when read back from a transcript
					blocks = append(blocks, anthropicBlockJSON{Type: BlockImage, Source: &anthropicSourceJSON{
						Data: base64.StdEncoding.EncodeToString(b.Data), MediaType: b.MediaType, Type: "base64"}})
				}
			}
		}
		if len(blocks) == 0 {
			continue
		}
		role := RoleUser
		if m.Role == RoleAssistant {
			role = RoleAssistant
		}
		out = append(out, anthropicMessageJSON{Content: blocks, Role: role})
	}
	return out
}

// anthropicEvent is one streamed event, in the fields the agent reads.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		Content    []anthropicContent `json:"content"`
		StopReason string             `json:"stop_reason"`
	} `json:"message"`
	ContentBlock anthropicContent `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
}

// anthropicContent is a content block of the answer.
type anthropicContent struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// anthropicAnswer accumulates the stream as the SDK's Message.Accumulate
// does for the blocks the agent keeps (text, tool_use).
type anthropicAnswer struct {
	content    []anthropicContent
	stopReason string
}

func (a *anthropicAnswer) add(ev *anthropicEvent) error {
	switch ev.Type {
	case "message_start":
		a.content, a.stopReason = ev.Message.Content, ev.Message.StopReason
	case "message_delta":
		a.stopReason = ev.Delta.StopReason
	case "content_block_start":
		// Blocks start in index order with no gaps.
		if ev.Index != len(a.content) {
			return fmt.Errorf("received event of type %s for content block at index %d, expected index %d", ev.Type, ev.Index, len(a.content))
		}
		a.content = append(a.content, ev.ContentBlock)
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= len(a.content) {
			return fmt.Errorf("received event of type %s for content block at index %d, but only %d blocks exist", ev.Type, ev.Index, len(a.content))
		}
		cb := &a.content[ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			cb.Text += ev.Delta.Text
		case "input_json_delta":
			if ev.Delta.PartialJSON != "" {
				if string(cb.Input) == "{}" {
					cb.Input = []byte(ev.Delta.PartialJSON)
				} else {
					cb.Input = append(cb.Input, ev.Delta.PartialJSON...)
				}
			}
		}
	case "content_block_stop":
		if ev.Index < 0 || ev.Index >= len(a.content) {
			return fmt.Errorf("received event of type %s for content block at index %d, but only %d blocks exist", ev.Type, ev.Index, len(a.content))
		}
		if cb := &a.content[ev.Index]; len(cb.Input) > 0 && !json.Valid(cb.Input) {
			cb.Input = json.RawMessage(`{}`) // a cut-off tool call: the SDK empties it too
		}
	}
	return nil
}

// text is the text of the answer's text blocks so far.
func (a *anthropicAnswer) text() string {
	var s string
	for _, c := range a.content {
		if c.Type == BlockText {
			s += c.Text
		}
	}
	return s
}

// response is the answer in the agent's own form.
func (a *anthropicAnswer) response() ModelResponse {
	resp := ModelResponse{StopReason: a.stopReason}
	for _, b := range a.content {
		switch b.Type {
		case BlockText:
			resp.Content = append(resp.Content, Block{Type: BlockText, Text: b.Text})
		case BlockToolUse:
			resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: safeJSON(b.Input)})
		}
	}
	return resp
}
