package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

type apiKind int

const (
	anthropicAPI apiKind = iota
	openaiAPI
)

// maxBody caps one request body; real providers refuse far smaller ones anyway.
const maxBody = 32 << 20

// Request is one recorded request, decoded into a provider-neutral shape.
type Request struct {
	Path      string
	Header    http.Header
	Trailer   http.Header // trailers after a chunked body, if any
	Body      []byte      // raw body as received
	Model     string
	MaxTokens int64
	Stream    bool
	// IncludeUsage: a streamed chat completion asked for its usage
	// (stream_options.include_usage).
	IncludeUsage bool
	System       string // system prompt text (OpenAI: the system/developer messages, joined)
	Messages     []Message
	Tools        []Tool
}

// Message is one conversation message. OpenAI "tool" messages appear as role
// "tool" with a single tool_result block.
type Message struct {
	Role    string
	Content []Block
}

// Block is one content block: "text", "tool_use", "tool_result" or another type
// (kept by name only).
type Block struct {
	Type      string
	Text      string          // text blocks
	ID        string          // tool_use
	Name      string          // tool_use
	Input     json.RawMessage // tool_use
	ToolUseID string          // tool_result
	Content   string          // tool_result text
	IsError   bool            // tool_result
}

// Tool is one tool definition offered to the model.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Text joins the text blocks of m.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the names of the offered tools.
func (r Request) ToolNames() []string {
	out := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

// decodeRequest always returns a Request (with what could be read) so that
// malformed requests are recorded too.
func decodeRequest(r *http.Request, api apiKind) (Request, error) {
	req := Request{Path: r.URL.Path, Header: r.Header.Clone()}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	req.Trailer = r.Trailer.Clone() // complete once the body is read
	if len(body) > maxBody {
		return req, errors.New("request body too large")
	}
	req.Body = body
	if api == anthropicAPI {
		err = decodeAnthropic(body, &req)
	} else {
		err = decodeOpenAI(body, &req)
	}
	return req, err
}

// textOrBlocks is a field that is either a string or an array of {type,text} parts.
func textOrBlocks(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or an array of text parts: %w", err)
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func decodeAnthropic(body []byte, req *Request) error {
	var in struct {
		Model     string          `json:"model"`
		MaxTokens int64           `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	req.Model, req.MaxTokens, req.Stream = in.Model, in.MaxTokens, in.Stream
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	sys, err := textOrBlocks(in.System)
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	req.System = sys
	for i, m := range in.Messages {
		msg := Message{Role: m.Role}
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			msg.Content = []Block{{Type: "text", Text: s}}
			req.Messages = append(req.Messages, msg)
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return fmt.Errorf("messages.%d.content: %w", i, err)
		}
		for j, b := range blocks {
			blk := Block{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, Input: b.Input, ToolUseID: b.ToolUseID, IsError: b.IsError}
			if b.Type == "tool_result" {
				c, err := textOrBlocks(b.Content)
				if err != nil {
					return fmt.Errorf("messages.%d.content.%d.content: %w", i, j, err)
				}
				blk.Content = c
			}
			msg.Content = append(msg.Content, blk)
		}
		req.Messages = append(req.Messages, msg)
	}
	if req.Model == "" {
		return errors.New("model: Field required")
	}
	if req.MaxTokens <= 0 {
		return errors.New("max_tokens: Field required")
	}
	if len(req.Messages) == 0 {
		return errors.New("messages: at least one message is required")
	}
	return nil
}

func decodeOpenAI(body []byte, req *Request) error {
	var in struct {
		Model               string `json:"model"`
		MaxTokens           int64  `json:"max_tokens"`
		MaxCompletionTokens int64  `json:"max_completion_tokens"`
		Stream              bool   `json:"stream"`
		StreamOptions       struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	req.Model, req.Stream, req.IncludeUsage = in.Model, in.Stream, in.StreamOptions.IncludeUsage
	req.MaxTokens = max(in.MaxTokens, in.MaxCompletionTokens)
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	var system []string
	for i, m := range in.Messages {
		text, err := textOrBlocks(m.Content)
		if err != nil {
			return fmt.Errorf("messages[%d].content: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "tool":
			req.Messages = append(req.Messages, Message{Role: "tool", Content: []Block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: text}}})
		default:
			msg := Message{Role: m.Role}
			if text != "" {
				msg.Content = append(msg.Content, Block{Type: "text", Text: text})
			}
			for _, tc := range m.ToolCalls {
				msg.Content = append(msg.Content, Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
			}
			req.Messages = append(req.Messages, msg)
		}
	}
	req.System = strings.Join(system, "\n")
	if req.Model == "" {
		return errors.New("you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return errors.New("messages: at least one message is required")
	}
	return nil
}

// checkToolPairing enforces what the real Messages API enforces: every
// tool_use is answered by a tool_result in the very next (user) message, and
// every tool_result answers a tool_use of the message right before it.
func checkToolPairing(msgs []Message) error {
	for i, m := range msgs {
		var uses []string
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				uses = append(uses, b.ID)
			}
		}
		if m.Role == "assistant" && len(uses) > 0 {
			if i+1 >= len(msgs) {
				return fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, strings.Join(uses, ", "))
			}
			answered := map[string]bool{}
			for _, b := range msgs[i+1].Content {
				if b.Type == "tool_result" {
					answered[b.ToolUseID] = true
				}
			}
			for _, id := range uses {
				if !answered[id] {
					return fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", i, id)
				}
			}
		}
		for _, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			if !precededBy(msgs, i, b.ToolUseID) {
				return fmt.Errorf("messages.%d.content: unexpected tool_use_id found in tool_result blocks: %s. Each tool_result block must have a corresponding tool_use block in the previous message", i, b.ToolUseID)
			}
		}
	}
	return nil
}

func precededBy(msgs []Message, i int, id string) bool {
	if i == 0 || msgs[i-1].Role != "assistant" {
		return false
	}
	for _, b := range msgs[i-1].Content {
		if b.Type == "tool_use" && b.ID == id {
			return true
		}
	}
	return false
}
