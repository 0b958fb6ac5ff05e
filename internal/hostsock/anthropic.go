package hostsock

import (
	"encoding/json"
	"strconv"
)

// The Messages API request, as far as the proxy lets it through. Kept at the
// top level: model (replaced), messages, system, max_tokens (capped), tools
// (client tools only), tool_choice, temperature, top_p, top_k, stop_sequences,
// stream, metadata, thinking. Everything else is dropped, notably mcp_servers
// (MCP connectors the provider would call), container (code execution),
// context_management and service_tier (a dearer tier on the owner's account).
type anthropicRequest struct {
	Model         string       `json:"model"`
	Messages      []aMessage   `json:"messages"`
	System        *aContent    `json:"system,omitempty"`
	MaxTokens     *json.Number `json:"max_tokens,omitempty"`
	Tools         []aTool      `json:"tools,omitempty"`
	ToolChoice    *aToolChoice `json:"tool_choice,omitempty"`
	Temperature   *float64     `json:"temperature,omitempty"`
	TopP          *float64     `json:"top_p,omitempty"`
	TopK          *int64       `json:"top_k,omitempty"`
	StopSequences []string     `json:"stop_sequences,omitempty"`
	Stream        *bool        `json:"stream,omitempty"`
	Metadata      *aMetadata   `json:"metadata,omitempty"`
	Thinking      *aThinking   `json:"thinking,omitempty"`
}

type aMessage struct {
	Role    string   `json:"role"`
	Content aContent `json:"content"`
}

// aContent is a string or an array of content blocks.
type aContent = textOrList[aBlock]

// aBlock is any content block; clean keeps the fields of its type.
type aBlock struct {
	Type         string         `json:"type"`
	Text         *string        `json:"text,omitempty"`
	Source       *aSource       `json:"source,omitempty"`
	Title        *string        `json:"title,omitempty"`
	Context      *string        `json:"context,omitempty"`
	Citations    *aCitations    `json:"citations,omitempty"`
	ID           *string        `json:"id,omitempty"`
	Name         *string        `json:"name,omitempty"`
	Input        *object        `json:"input,omitempty"`
	ToolUseID    *string        `json:"tool_use_id,omitempty"`
	Content      *aContent      `json:"content,omitempty"`
	IsError      *bool          `json:"is_error,omitempty"`
	Thinking     *string        `json:"thinking,omitempty"`
	Signature    *string        `json:"signature,omitempty"`
	Data         *string        `json:"data,omitempty"`
	CacheControl *aCacheControl `json:"cache_control,omitempty"`
}

func (aBlock) listName() string { return "content blocks" }

// aSource is a block's source: an object (image, document) or a string (a
// search result's label).
type aSource struct {
	label     *string
	Type      string    `json:"type"`
	MediaType *string   `json:"media_type,omitempty"`
	Data      *string   `json:"data,omitempty"`
	Content   *aContent `json:"content,omitempty"`
}

type aSourceObject aSource

func (s *aSource) UnmarshalJSON(b []byte) error {
	if firstByte(b) == '"' {
		var l string
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		*s = aSource{label: &l}
		return nil
	}
	var o aSourceObject
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*s = aSource(o)
	return nil
}

func (s aSource) MarshalJSON() ([]byte, error) {
	if s.label != nil {
		return json.Marshal(*s.label)
	}
	return json.Marshal(aSourceObject(s))
}

// aCitations is a document's {"enabled": bool}; the array of citations an
// earlier answer's text block carried is dropped.
type aCitations struct {
	Enabled *bool `json:"enabled,omitempty"`
	isArray bool
}

type aCitationsObject aCitations

func (c *aCitations) UnmarshalJSON(b []byte) error {
	if firstByte(b) == '[' {
		*c = aCitations{isArray: true}
		return nil
	}
	var o aCitationsObject
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*c = aCitations(o)
	return nil
}

type aCacheControl struct {
	Type string  `json:"type"`
	TTL  *string `json:"ttl,omitempty"`
}

// object is a JSON object kept as it came (a tool's input, a schema): data for
// the model, never instructions to the provider.
type object json.RawMessage

func (o *object) UnmarshalJSON(b []byte) error {
	if firstByte(b) != '{' {
		return malformed("tool input and input_schema must be JSON objects")
	}
	*o = append((*o)[:0], b...)
	return nil
}

func (o object) MarshalJSON() ([]byte, error) { return json.RawMessage(o).MarshalJSON() }

// aTool is a client tool: one the agent runs itself. A tool with any other
// type is a server tool the provider runs (web search, web fetch, code
// execution, …) or an Anthropic-defined one needing a beta: refused.
type aTool struct {
	Type         string         `json:"type,omitempty"`
	Name         string         `json:"name"`
	Description  *string        `json:"description,omitempty"`
	InputSchema  *object        `json:"input_schema,omitempty"`
	CacheControl *aCacheControl `json:"cache_control,omitempty"`
}

type aToolChoice struct {
	Type                   string  `json:"type"`
	Name                   *string `json:"name,omitempty"`
	DisableParallelToolUse *bool   `json:"disable_parallel_tool_use,omitempty"`
}

type aMetadata struct {
	UserID *string `json:"user_id,omitempty"`
}

type aThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens,omitempty"`
}

// Where a block stands decides which types it may have.
var (
	messageBlocks    = set("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "search_result")
	toolResultBlocks = set("text", "image", "document", "search_result")
	documentBlocks   = set("text", "image")
	textBlocks       = set("text")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// rebuildAnthropic rebuilds a Messages API request (countTokens: the
// count_tokens endpoint's, which takes fewer fields), and returns its
// max_tokens as capped (0 for count_tokens).
func rebuildAnthropic(body []byte, countTokens bool, p Policy) ([]byte, int64, error) {
	var in anthropicRequest
	if err := decodeBody(body, &in); err != nil {
		return nil, 0, err
	}
	out := anthropicRequest{Model: p.Model, Messages: in.Messages, System: in.System, Thinking: in.Thinking}
	if len(in.Messages) == 0 {
		return nil, 0, malformed("messages must not be empty")
	}
	for i := range out.Messages {
		m := &out.Messages[i]
		if m.Role != "user" && m.Role != "assistant" {
			return nil, 0, malformed("messages.%d.role must be user or assistant", i)
		}
		if err := cleanContent(&m.Content, messageBlocks, "a message"); err != nil {
			return nil, 0, err
		}
	}
	if out.System != nil {
		if err := cleanContent(out.System, textBlocks, "the system prompt"); err != nil {
			return nil, 0, err
		}
	}
	for i, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, 0, denied("server tool %s (tools.%d) is not allowed: only the agent's own tools are", quote(t.Type), i)
		}
		if t.Name == "" {
			return nil, 0, malformed("tools.%d.name is required", i)
		}
		if t.CacheControl != nil {
			t.CacheControl = cleanCache(t.CacheControl)
		}
		out.Tools = append(out.Tools, t)
	}
	if in.ToolChoice != nil {
		switch in.ToolChoice.Type {
		case "auto", "any", "tool", "none":
		default:
			return nil, 0, malformed("tool_choice.type must be auto, any, tool or none")
		}
		out.ToolChoice = in.ToolChoice
	}
	var maxTokens int64
	if !countTokens {
		if in.MaxTokens == nil {
			return nil, 0, malformed("max_tokens is required")
		}
		n, err := capTokens("max_tokens", *in.MaxTokens, p.MaxTokens)
		if err != nil {
			return nil, 0, err
		}
		maxTokens = n
		num := json.Number(strconv.FormatInt(n, 10))
		out.MaxTokens = &num
		out.Temperature, out.TopP, out.TopK = in.Temperature, in.TopP, in.TopK
		out.StopSequences, out.Stream, out.Metadata = in.StopSequences, in.Stream, in.Metadata
	}
	if th := out.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			// The budget must stay below max_tokens, which may just have been capped.
			if th.BudgetTokens != nil && maxTokens > 0 && *th.BudgetTokens >= maxTokens {
				b := maxTokens - 1
				th.BudgetTokens = &b
			}
		case "disabled", "adaptive":
			th.BudgetTokens = nil
		default:
			return nil, 0, malformed("thinking.type must be enabled, disabled or adaptive")
		}
	}
	b, err := encode(out)
	return b, maxTokens, err
}

// cleanContent checks every block against allowed (and what it contains
// against its own rules), keeping only the fields of each block's type.
func cleanContent(c *aContent, allowed map[string]bool, where string) error {
	if c.text != nil {
		return nil
	}
	for i := range c.items {
		if err := cleanBlock(&c.items[i], allowed, where); err != nil {
			return err
		}
	}
	return nil
}

func cleanBlock(b *aBlock, allowed map[string]bool, where string) error {
	if !allowed[b.Type] {
		return denied("content block type %s is not allowed in %s", quote(b.Type), where)
	}
	cc := cleanCache(b.CacheControl)
	switch b.Type {
	case "text":
		if b.Text == nil {
			return malformed("a text block needs text")
		}
		*b = aBlock{Type: b.Type, Text: b.Text, CacheControl: cc}
	case "image":
		// Only inline data: a URL source makes the provider fetch it, a file
		// source reads the owner's uploaded files.
		if b.Source == nil || b.Source.label != nil || b.Source.Type != "base64" {
			return denied("image source %s is not allowed: only base64 data", sourceType(b.Source))
		}
		*b = aBlock{Type: b.Type, Source: &aSource{Type: "base64", MediaType: b.Source.MediaType, Data: b.Source.Data}, CacheControl: cc}
	case "document":
		src := b.Source
		if src == nil || src.label != nil {
			return denied("document source %s is not allowed: only base64, text or content", sourceType(src))
		}
		switch src.Type {
		case "base64", "text":
			src = &aSource{Type: src.Type, MediaType: src.MediaType, Data: src.Data}
		case "content":
			if src.Content == nil {
				return malformed("a content document needs content")
			}
			if err := cleanContent(src.Content, documentBlocks, "a document"); err != nil {
				return err
			}
			src = &aSource{Type: src.Type, Content: src.Content}
		default:
			return denied("document source %s is not allowed: only base64, text or content", sourceType(src))
		}
		*b = aBlock{Type: b.Type, Source: src, Title: b.Title, Context: b.Context, Citations: cleanCitations(b.Citations), CacheControl: cc}
	case "tool_use":
		if b.ID == nil || b.Name == nil {
			return malformed("a tool_use block needs id and name")
		}
		in := b.Input
		if in == nil {
			in = &object{'{', '}'}
		}
		*b = aBlock{Type: b.Type, ID: b.ID, Name: b.Name, Input: in, CacheControl: cc}
	case "tool_result":
		if b.ToolUseID == nil {
			return malformed("a tool_result block needs tool_use_id")
		}
		if b.Content != nil {
			if err := cleanContent(b.Content, toolResultBlocks, "a tool result"); err != nil {
				return err
			}
		}
		*b = aBlock{Type: b.Type, ToolUseID: b.ToolUseID, Content: b.Content, IsError: b.IsError, CacheControl: cc}
	case "thinking":
		*b = aBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}
	case "redacted_thinking":
		*b = aBlock{Type: b.Type, Data: b.Data}
	case "search_result":
		if b.Source == nil || b.Source.label == nil {
			return malformed("a search_result block's source is a string")
		}
		if b.Content == nil || b.Content.text != nil {
			return malformed("a search_result block's content is an array of text blocks")
		}
		if err := cleanContent(b.Content, textBlocks, "a search result"); err != nil {
			return err
		}
		*b = aBlock{Type: b.Type, Source: b.Source, Title: b.Title, Content: b.Content, Citations: cleanCitations(b.Citations), CacheControl: cc}
	}
	return nil
}

func sourceType(s *aSource) string {
	switch {
	case s == nil:
		return "(none)"
	case s.label != nil:
		return "(a string)"
	}
	return quote(s.Type)
}

func cleanCitations(c *aCitations) *aCitations {
	if c == nil || c.isArray || c.Enabled == nil {
		return nil
	}
	return &aCitations{Enabled: c.Enabled}
}

func cleanCache(c *aCacheControl) *aCacheControl {
	if c == nil {
		return nil
	}
	return &aCacheControl{Type: c.Type, TTL: c.TTL}
}
