package hostsock

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The chat completions request, as far as the proxy lets it through. Kept:
// model (replaced), messages, max_tokens and max_completion_tokens (capped;
// max_tokens is added when neither is given, since the API's default is the
// model's whole output), tools (function tools only), tool_choice,
// parallel_tool_calls, temperature, top_p, presence_penalty,
// frequency_penalty, seed, stop, stream, stream_options, response_format,
// reasoning_effort. Dropped with everything unknown: web_search_options (the
// provider searches the web), audio and modalities, n (several answers billed
// at once), store and metadata (stored on the owner's account), prediction,
// service_tier, logprobs, logit_bias, user, the deprecated functions.
type openaiRequest struct {
	Model               string          `json:"model"`
	Messages            []oMessage      `json:"messages"`
	MaxTokens           *json.Number    `json:"max_tokens,omitempty"`
	MaxCompletionTokens *json.Number    `json:"max_completion_tokens,omitempty"`
	Tools               []oTool         `json:"tools,omitempty"`
	ToolChoice          *oToolChoice    `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                *oStop          `json:"stop,omitempty"`
	Stream              *bool           `json:"stream,omitempty"`
	StreamOptions       *oStreamOptions `json:"stream_options,omitempty"`
	ResponseFormat      *oFormat        `json:"response_format,omitempty"`
	ReasoningEffort     *string         `json:"reasoning_effort,omitempty"`
}

type oMessage struct {
	Role       string      `json:"role"`
	Content    *oContent   `json:"content,omitempty"`
	Name       *string     `json:"name,omitempty"`
	ToolCalls  []oToolCall `json:"tool_calls,omitempty"`
	ToolCallID *string     `json:"tool_call_id,omitempty"`
	Refusal    *string     `json:"refusal,omitempty"`
}

// oContent is a string or an array of content parts.
type oContent = textOrList[oPart]

type oPart struct {
	Type       string       `json:"type"`
	Text       *string      `json:"text,omitempty"`
	ImageURL   *oImageURL   `json:"image_url,omitempty"`
	InputAudio *oInputAudio `json:"input_audio,omitempty"`
	File       *oFile       `json:"file,omitempty"`
	Refusal    *string      `json:"refusal,omitempty"`
}

func (oPart) listName() string { return "content parts" }

type oImageURL struct {
	URL    string  `json:"url"`
	Detail *string `json:"detail,omitempty"`
}

type oInputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

type oFile struct {
	FileData *string `json:"file_data,omitempty"`
	FileID   *string `json:"file_id,omitempty"`
	Filename *string `json:"filename,omitempty"`
}

type oToolCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function oFunctionCall `json:"function"`
}

type oFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oTool struct {
	Type     string       `json:"type"`
	Function oFunctionDef `json:"function"`
}

type oFunctionDef struct {
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
	Parameters  *object `json:"parameters,omitempty"`
	Strict      *bool   `json:"strict,omitempty"`
}

// oToolChoice is "none", "auto", "required" or {"type":"function","function":{"name":…}}.
type oToolChoice struct {
	mode     *string
	Type     string        `json:"type"`
	Function *oFunctionRef `json:"function,omitempty"`
}

type oFunctionRef struct {
	Name string `json:"name"`
}

type oToolChoiceObject oToolChoice

func (c *oToolChoice) UnmarshalJSON(b []byte) error {
	if firstByte(b) == '"' {
		var m string
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		*c = oToolChoice{mode: &m}
		return nil
	}
	var o oToolChoiceObject
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*c = oToolChoice(o)
	return nil
}

func (c oToolChoice) MarshalJSON() ([]byte, error) {
	if c.mode != nil {
		return json.Marshal(*c.mode)
	}
	return json.Marshal(oToolChoiceObject(c))
}

// oStop is a string or an array of strings.
type oStop struct {
	one  *string
	many []string
}

func (s *oStop) UnmarshalJSON(b []byte) error {
	if firstByte(b) == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = oStop{one: &one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = oStop{many: many}
	return nil
}

func (s oStop) MarshalJSON() ([]byte, error) {
	if s.one != nil {
		return json.Marshal(*s.one)
	}
	return json.Marshal(s.many)
}

type oStreamOptions struct {
	IncludeUsage *bool `json:"include_usage,omitempty"`
}

type oFormat struct {
	Type       string       `json:"type"`
	JSONSchema *oJSONSchema `json:"json_schema,omitempty"`
}

type oJSONSchema struct {
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
	Schema      *object `json:"schema,omitempty"`
	Strict      *bool   `json:"strict,omitempty"`
}

// rebuildOpenAI rebuilds a chat completions request, and returns its
// max_tokens as capped.
func rebuildOpenAI(body []byte, p Policy) ([]byte, int64, error) {
	var in openaiRequest
	if err := decodeBody(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Messages) == 0 {
		return nil, 0, malformed("messages must not be empty")
	}
	out := openaiRequest{
		Model: p.Model, Messages: in.Messages, ParallelToolCalls: in.ParallelToolCalls,
		Temperature: in.Temperature, TopP: in.TopP, PresencePenalty: in.PresencePenalty,
		FrequencyPenalty: in.FrequencyPenalty, Seed: in.Seed, Stop: in.Stop, Stream: in.Stream,
		StreamOptions: in.StreamOptions, ReasoningEffort: in.ReasoningEffort,
	}
	for i := range out.Messages {
		if err := cleanOpenAIMessage(&out.Messages[i], i); err != nil {
			return nil, 0, err
		}
	}
	for i, t := range in.Tools {
		if t.Type != "function" {
			return nil, 0, denied("tool type %s (tools.%d) is not allowed: only function tools are", quote(t.Type), i)
		}
		if t.Function.Name == "" {
			return nil, 0, malformed("tools.%d.function.name is required", i)
		}
		out.Tools = append(out.Tools, oTool{Type: t.Type, Function: t.Function})
	}
	if c := in.ToolChoice; c != nil {
		switch {
		case c.mode != nil:
			switch *c.mode {
			case "none", "auto", "required":
			default:
				return nil, 0, malformed("tool_choice must be none, auto, required or a function")
			}
			out.ToolChoice = &oToolChoice{mode: c.mode}
		case c.Type == "function" && c.Function != nil:
			out.ToolChoice = &oToolChoice{Type: c.Type, Function: &oFunctionRef{Name: c.Function.Name}}
		default:
			return nil, 0, denied("tool_choice type %s is not allowed: only function", quote(c.Type))
		}
	}
	if f := in.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "json_object":
			out.ResponseFormat = &oFormat{Type: f.Type}
		case "json_schema":
			out.ResponseFormat = &oFormat{Type: f.Type, JSONSchema: f.JSONSchema}
		default:
			return nil, 0, malformed("response_format.type must be text, json_object or json_schema")
		}
	}
	var maxTokens int64 // the larger, when both are given
	capped := func(field string, n *json.Number) (*json.Number, error) {
		if n == nil {
			return nil, nil
		}
		v, err := capTokens(field, *n, p.MaxTokens)
		if err != nil {
			return nil, err
		}
		maxTokens = max(maxTokens, v)
		num := json.Number(strconv.FormatInt(v, 10))
		return &num, nil
	}
	var err error
	if out.MaxTokens, err = capped("max_tokens", in.MaxTokens); err != nil {
		return nil, 0, err
	}
	if out.MaxCompletionTokens, err = capped("max_completion_tokens", in.MaxCompletionTokens); err != nil {
		return nil, 0, err
	}
	if out.Stream != nil && *out.Stream {
		// The usage comes in a last chunk only when asked for; the proxy
		// counts it (usage.go), and the SDKs take the chunk in their stride.
		yes := true
		out.StreamOptions = &oStreamOptions{IncludeUsage: &yes}
	}
	if out.MaxTokens == nil && out.MaxCompletionTokens == nil {
		maxTokens = p.MaxTokens
		num := json.Number(strconv.FormatInt(p.MaxTokens, 10))
		out.MaxTokens = &num
	}
	b, err := encode(out)
	return b, maxTokens, err
}

func cleanOpenAIMessage(m *oMessage, i int) error {
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	default:
		return malformed("messages[%d].role must be system, developer, user, assistant or tool", i)
	}
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		if tc.Type != "function" {
			return denied("tool call type %s (messages[%d]) is not allowed: only function", quote(tc.Type), i)
		}
	}
	if m.Content == nil || m.Content.text != nil {
		return nil
	}
	for j := range m.Content.items {
		p := &m.Content.items[j]
		switch p.Type {
		case "text":
			if p.Text == nil {
				return malformed("messages[%d].content[%d]: a text part needs text", i, j)
			}
			*p = oPart{Type: p.Type, Text: p.Text}
		case "image_url":
			// A URL makes the provider fetch it; a data: URL is the image itself.
			if p.ImageURL == nil || !strings.HasPrefix(p.ImageURL.URL, "data:") {
				return denied("image_url parts must carry a data: URL, not a link the provider would fetch")
			}
			*p = oPart{Type: p.Type, ImageURL: &oImageURL{URL: p.ImageURL.URL, Detail: p.ImageURL.Detail}}
		case "input_audio":
			if p.InputAudio == nil {
				return malformed("messages[%d].content[%d]: an input_audio part needs input_audio", i, j)
			}
			*p = oPart{Type: p.Type, InputAudio: p.InputAudio}
		case "file":
			// file_id names a file stored on the owner's account.
			if p.File == nil || p.File.FileID != nil || p.File.FileData == nil {
				return denied("file parts must carry file_data, not a stored file's id")
			}
			*p = oPart{Type: p.Type, File: &oFile{FileData: p.File.FileData, Filename: p.File.Filename}}
		case "refusal":
			*p = oPart{Type: p.Type, Refusal: p.Refusal}
		default:
			return denied("content part type %s is not allowed", quote(p.Type))
		}
	}
	return nil
}
