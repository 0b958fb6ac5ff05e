package agent

import (
	"context"
	"encoding/json"
	"strings"
)

// The conversation is kept in a provider-neutral form so the same loop, the
// same transcript file and the same trimming serve every provider.

// Block types.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// Roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Block is one piece of a message.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`        // text; tool_result content
	ID        string          `json:"id,omitempty"`          // tool_use id
	Name      string          `json:"name,omitempty"`        // tool_use tool name
	Input     json.RawMessage `json:"input,omitempty"`       // tool_use arguments (always valid JSON)
	ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result: the tool_use it answers
	IsError   bool            `json:"is_error,omitempty"`    // tool_result
	MediaType string          `json:"media_type,omitempty"`  // image
	Data      []byte          `json:"-"`                     // image: never kept in the transcript
}

// Message is one turn of the conversation.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// hasToolResult reports whether m answers tool calls (as opposed to a prompt).
func (m Message) hasToolResult() bool {
	for _, b := range m.Content {
		if b.Type == BlockToolResult {
			return true
		}
	}
	return false
}

// toolUses returns the tool_use blocks of m.
func (m Message) toolUses() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// text concatenates the text blocks of m.
func (m Message) text() string {
	var sb strings.Builder
	for _, b := range m.Content {
		if b.Type == BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// ToolDef describes one tool to the model.
type ToolDef struct {
	Name        string
	Description string
	Properties  map[string]any // JSON-schema properties
	Required    []string
	// Extra holds the schema's other top-level keywords (a bridge tool's
	// additionalProperties, …), passed to the provider as they are.
	Extra map[string]any
}

// ModelRequest is one call to the model.
type ModelRequest struct {
	Model     string
	MaxTokens int
	System    string
	Messages  []Message
	Tools     []ToolDef
	// OnText, when set, is told the turn's text so far each time the
	// stream adds to it.
	OnText func(text string)
}

// ModelResponse is the model's answer; StopReason is "tool_use" when it wants
// tools run (normalized across providers).
type ModelResponse struct {
	Content    []Block
	StopReason string
}

// Model is a provider behind the host socket.
type Model interface {
	Complete(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// safeJSON returns raw if it is valid JSON, else raw as a JSON string, so a
// malformed tool input from the model can still be stored and sent back, and
// is then refused by strict decoding as "not an object".
func safeJSON(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(raw) {
		return json.RawMessage(raw)
	}
	b, _ := json.Marshal(string(raw)) // a Go string always marshals
	return b
}
