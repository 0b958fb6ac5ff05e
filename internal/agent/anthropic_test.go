package agent

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkParams is the request as the SDK's own types build it: the reference
// the agent's hand-made body must equal.
func sdkParams(req ModelRequest) anthropic.MessageNewParams {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
		Messages:  make([]anthropic.MessageParam, 0, len(req.Messages)),
	}
	for _, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text != "" {
					blocks = append(blocks, anthropic.NewTextBlock(b.Text))
				}
			case BlockToolUse:
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, objectOrEmpty(b.Input), b.Name))
			case BlockToolResult:
				blocks = append(blocks, anthropic.NewToolResultBlock(b.ToolUseID, b.Text, b.IsError))
			case BlockImage:
				if len(b.Data) > 0 {
					blocks = append(blocks, anthropic.NewImageBlockBase64(b.MediaType, base64.StdEncoding.EncodeToString(b.Data)))
				}
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if m.Role == RoleAssistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: t.Properties, Required: t.Required, ExtraFields: t.Extra},
		}})
	}
	return params
}

func TestAnthropicBodyMatchesSDK(t *testing.T) {
	conversation := []Message{
		{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "hi <b>&</b>"}, {Type: BlockText, Text: ""},
			{Type: BlockImage, MediaType: "image/png", Data: []byte{1, 2, 3}}, {Type: BlockImage, MediaType: "image/png"}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockText, Text: "ok"},
			{Type: BlockToolUse, ID: "t1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
			{Type: BlockToolUse, ID: "t2", Name: "bash", Input: json.RawMessage(`"not an object"`)}}},
		{Role: RoleUser, Content: []Block{{Type: BlockToolResult, ToolUseID: "t1", Text: "out"},
			{Type: BlockToolResult, ToolUseID: "t2", Text: "", IsError: true}}},
		{Role: RoleAssistant, Content: []Block{{Type: BlockText, Text: ""}}},
		{Role: RoleUser, Content: []Block{{Type: BlockText, Text: "again \u2028 é"}}},
	}
	tools := []ToolDef{
		{Name: "bash", Description: "run", Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}},
		{Name: "list_tasks", Properties: map[string]any{}},
		{Name: "nothing"},
		{Name: "web_search", Description: "search\n\nguide", Properties: map[string]any{"q": map[string]any{"type": "string", "maxLength": 400.0}},
			Required: []string{"q"}, Extra: map[string]any{"additionalProperties": false, "$schema": "x"}},
	}
	tests := []struct {
		name string
		req  ModelRequest
	}{
		{"prompt only", ModelRequest{Model: "m", MaxTokens: 10, Messages: conversation[:1]}},
		{"full", ModelRequest{Model: "claude-test", MaxTokens: 8192, System: "You are Andy.\n<x>", Messages: conversation, Tools: tools}},
		{"empty", ModelRequest{Model: "m", MaxTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := sdkParams(tt.req).MarshalJSON()
			require.NoError(t, err)
			var wantObj map[string]any
			require.NoError(t, json.Unmarshal(want, &wantObj))
			wantObj["stream"] = true // what the SDK's NewStreaming adds

			got, err := anthropicBody(tt.req)
			require.NoError(t, err)
			var gotObj map[string]any
			require.NoError(t, json.Unmarshal(got, &gotObj))
			wantJSON, _ := json.MarshalIndent(wantObj, "", " ")
			gotJSON, _ := json.MarshalIndent(gotObj, "", " ")
			assert.Equal(t, string(wantJSON), string(gotJSON))
		})
	}
}

func TestAnthropicAnswerAccumulates(t *testing.T) {
	tests := []struct {
		name    string
		events  []string
		want    ModelResponse
		wantErr string
	}{
		{"text and tool", []string{
			`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"stop_reason":null}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"bash","input":{}}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}`,
			`{"type":"message_stop"}`,
		}, ModelResponse{StopReason: "tool_use", Content: []Block{{Type: BlockText, Text: "Hello"},
			{Type: BlockToolUse, ID: "tu1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}}}, ""},
		{"tool without arguments", []string{
			`{"type":"message_start","message":{"content":[]}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu1","name":"list_tasks","input":{}}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`,
		}, ModelResponse{StopReason: "tool_use", Content: []Block{{Type: BlockToolUse, ID: "tu1", Name: "list_tasks", Input: json.RawMessage(`{}`)}}}, ""},
		{"cut-off arguments", []string{
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu1","name":"bash","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}`,
			`{"type":"content_block_stop","index":0}`,
		}, ModelResponse{Content: []Block{{Type: BlockToolUse, ID: "tu1", Name: "bash", Input: json.RawMessage(`{}`)}}}, ""},
		{"block out of order", []string{
			`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		}, ModelResponse{}, "expected index 0"},
		{"delta without block", []string{
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
		}, ModelResponse{}, "index 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ans anthropicAnswer
			var err error
			for _, e := range tt.events {
				var ev anthropicEvent
				require.NoError(t, json.Unmarshal([]byte(e), &ev))
				if err = ans.add(&ev); err != nil {
					break
				}
			}
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, ans.response())
		})
	}
}
