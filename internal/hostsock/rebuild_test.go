package hostsock

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testPolicy = Policy{Model: "claude-host", MaxTokens: 1000}

func TestRebuildAnthropic(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		countTokens bool
		want        string // the rebuilt body, or
		status      int    // the refusal's status
		msg         string // and text
	}{
		{name: "minimal request, model replaced",
			in:   `{"model":"claude-opus-EVIL","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "no model at all",
			in:   `{"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_tokens capped",
			in:   `{"model":"m","max_tokens":1000000000,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_tokens beyond any integer is capped",
			in:   `{"model":"m","max_tokens":1e400,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_tokens as an exponent",
			in:   `{"model":"m","max_tokens":5e2,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_tokens missing", in: `{"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, msg: "max_tokens is required"},
		{name: "max_tokens zero", in: `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, msg: "max_tokens must be a positive whole number"},
		{name: "max_tokens fractional", in: `{"max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, msg: "max_tokens must be a positive whole number"},
		{name: "unknown and egress fields dropped",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
				"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"x"}],
				"container":"c1","service_tier":"priority","context_management":{},"betas":["x"]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "every kept field",
			in: `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"bash","description":"run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"temperature":0.5,"top_p":0.9,"top_k":40,
				"stop_sequences":["END"],"stream":true,"metadata":{"user_id":"u1","other":"x"},
				"thinking":{"type":"enabled","budget_tokens":2000}}`,
			want: `{"model":"claude-host","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"bash","description":"run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"temperature":0.5,"top_p":0.9,"top_k":40,
				"stop_sequences":["END"],"stream":true,"metadata":{"user_id":"u1"},
				"thinking":{"type":"enabled","budget_tokens":4}}`},
		{name: "count_tokens keeps fewer fields",
			in: `{"model":"m","max_tokens":5,"stream":true,"temperature":1,"system":[{"type":"text","text":"s"}],
				"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","input_schema":{}}]}`,
			countTokens: true,
			want: `{"model":"claude-host","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"}],
				"tools":[{"name":"t","input_schema":{}}]}`},
		{name: "client tool typed custom",
			in:   `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","name":"t","input_schema":{}}]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","name":"t","input_schema":{}}]}`},
		{name: "web_search server tool", in: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"name":"bash","input_schema":{}},{"type":"web_search_20250305","name":"web_search"}]}`,
			status: 403, msg: `denied: server tool "web_search_20250305" (tools.1) is not allowed: only the agent's own tools are`},
		{name: "web_fetch server tool", in: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`,
			status: 403, msg: `denied: server tool "web_fetch_20250910" (tools.0) is not allowed: only the agent's own tools are`},
		{name: "code execution", in: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`,
			status: 403, msg: `denied: server tool "code_execution_20250825" (tools.0) is not allowed: only the agent's own tools are`},
		{name: "server tool under a differently cased key", in: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],
			"tools":[{"TYPE":"web_search_20250305","name":"web_search"}]}`,
			status: 403, msg: `denied: server tool "web_search_20250305" (tools.0) is not allowed: only the agent's own tools are`},
		{name: "image from a URL", in: `{"max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"image","source":{"type":"url","url":"https://evil.example/x.png"}}]}]}`,
			status: 403, msg: `denied: image source "url" is not allowed: only base64 data`},
		{name: "image URL inside a tool result", in: `{"max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"url","url":"https://evil.example/"}}]}]}]}`,
			status: 403, msg: `denied: image source "url" is not allowed: only base64 data`},
		{name: "document from the owner's files", in: `{"max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}`,
			status: 403, msg: `denied: document source "file" is not allowed: only base64, text or content`},
		{name: "server tool block in the history", in: `{"max_tokens":5,"messages":[{"role":"assistant","content":[
			{"type":"server_tool_use","id":"s1","name":"web_fetch","input":{"url":"https://evil.example/"}}]}]}`,
			status: 403, msg: `denied: content block type "server_tool_use" is not allowed in a message`},
		{name: "mcp block", in: `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"mcp_tool_use","id":"m"}]}]}`,
			status: 403, msg: `denied: content block type "mcp_tool_use" is not allowed in a message`},
		{name: "tool_use in a tool result", in: `{"max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_use","id":"x","name":"y","input":{}}]}]}]}`,
			status: 403, msg: `denied: content block type "tool_use" is not allowed in a tool result`},
		{name: "image in the system prompt", in: `{"max_tokens":5,"system":[{"type":"image","source":{"type":"base64"}}],
			"messages":[{"role":"user","content":"hi"}]}`,
			status: 403, msg: `denied: content block type "image" is not allowed in the system prompt`},
		{name: "long type name is clipped", in: `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"` + strings.Repeat("x", 100) + `"}]}]}`,
			status: 403, msg: `denied: content block type "` + strings.Repeat("x", 40) + `…" is not allowed in a message`},
		{name: "blocks keep only their type's fields",
			in: `{"max_tokens":5,"messages":[
				{"role":"assistant","content":[{"type":"text","text":"a","citations":[{"type":"web_search_result_location","url":"https://x"}],"source":{"type":"url"}},
					{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"},"text":"x","server_name":"evil"}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out","is_error":false,"input":{"a":1}},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA","url":"https://evil.example/"},"title":"t"},
					{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"d","citations":{"enabled":true}},
					{"type":"search_result","source":"https://label","title":"s","content":[{"type":"text","text":"r"}]}]}]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[
				{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out","is_error":false},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
					{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"},"title":"d","citations":{"enabled":true}},
					{"type":"search_result","source":"https://label","title":"s","content":[{"type":"text","text":"r"}]}]}]}`},
		{name: "duplicate keys: the one the proxy read is the one sent",
			in:   `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://evil.example/"},"type":"text","text":"hi"}]}]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{name: "HTML characters are not escaped",
			in:   `{"max_tokens":5,"messages":[{"role":"user","content":"<b>&</b>"}]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":"<b>&</b>"}]}`},
		{name: "not JSON", in: `{"max_tokens":`, status: 400, msg: "body is not valid JSON: unexpected end of JSON input"},
		{name: "not an object", in: `[1]`, status: 400, msg: "body must be a JSON object, not a array"},
		{name: "wrong type", in: `{"max_tokens":5,"messages":"hi"}`, status: 400, msg: "field messages must not be a JSON string"},
		{name: "no messages", in: `{"max_tokens":5,"messages":[]}`, status: 400, msg: "messages must not be empty"},
		{name: "bad role", in: `{"max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, status: 400, msg: "messages.0.role must be user or assistant"},
		{name: "null content", in: `{"max_tokens":5,"messages":[{"role":"user","content":null}]}`, status: 400,
			msg: "content must be a string or an array of content blocks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, maxTokens, err := rebuildAnthropic([]byte(tc.in), tc.countTokens, testPolicy)
			if tc.want != "" {
				require.NoError(t, err)
				assert.JSONEq(t, tc.want, string(out))
				assert.Equal(t, maxTokensOf(t, out), maxTokens)
				return
			}
			var re *requestError
			require.True(t, errors.As(err, &re), "want a refusal, got %v (%s)", err, out)
			assert.Equal(t, tc.status, re.status)
			assert.Equal(t, tc.msg, re.msg)
		})
	}
}

func TestRebuildOpenAI(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		status int
		msg    string
	}{
		{name: "model replaced, max_tokens capped",
			in:   `{"model":"gpt-EVIL","max_tokens":99999999,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_completion_tokens capped",
			in:   `{"max_completion_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "no limit given: the cap is added",
			in:   `{"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"claude-host","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "egress and cost fields dropped",
			in: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"n":8,"web_search_options":{},
				"audio":{"voice":"x"},"modalities":["audio"],"store":true,"metadata":{"a":"b"},"service_tier":"priority",
				"prediction":{"type":"content","content":"x"},"functions":[{"name":"f"}],"logit_bias":{"1":2}}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "every kept field",
			in: `{"max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},
				{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"out"}],
				"tools":[{"type":"function","function":{"name":"bash","description":"d","parameters":{"type":"object"},"strict":true}}],
				"tool_choice":"auto","parallel_tool_calls":false,"temperature":0.2,"top_p":1,"presence_penalty":0,
				"frequency_penalty":0.1,"seed":7,"stop":["x"],"stream":true,"stream_options":{"include_usage":true},
				"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"reasoning_effort":"low"}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},
				{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"out"}],
				"tools":[{"type":"function","function":{"name":"bash","description":"d","parameters":{"type":"object"},"strict":true}}],
				"tool_choice":"auto","parallel_tool_calls":false,"temperature":0.2,"top_p":1,"presence_penalty":0,
				"frequency_penalty":0.1,"seed":7,"stop":["x"],"stream":true,"stream_options":{"include_usage":true},
				"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"reasoning_effort":"low"}`},
		{name: "tool_choice naming a function",
			in:   `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"function","function":{"name":"bash","x":1}}}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"function","function":{"name":"bash"}}}`},
		{name: "a non-function tool", in: `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_preview"}]}`,
			status: 403, msg: `denied: tool type "web_search_preview" (tools.0) is not allowed: only function tools are`},
		{name: "image from a URL", in: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://evil.example/x.png"}}]}]}`,
			status: 403, msg: "denied: image_url parts must carry a data: URL, not a link the provider would fetch"},
		{name: "image inline",
			in:   `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"},"text":"x"}]}]}`,
			want: `{"model":"claude-host","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`},
		{name: "a stored file", in: `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			status: 403, msg: "denied: file parts must carry file_data, not a stored file's id"},
		{name: "unknown part", in: `{"messages":[{"role":"user","content":[{"type":"input_file_url"}]}]}`,
			status: 403, msg: `denied: content part type "input_file_url" is not allowed`},
		{name: "custom tool call", in: `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom"}]}]}`,
			status: 403, msg: `denied: tool call type "custom" (messages[0]) is not allowed: only function`},
		{name: "no messages", in: `{"model":"x"}`, status: 400, msg: "messages must not be empty"},
		{name: "bad role", in: `{"messages":[{"role":"root","content":"x"}]}`, status: 400,
			msg: "messages[0].role must be system, developer, user, assistant or tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, maxTokens, err := rebuildOpenAI([]byte(tc.in), testPolicy)
			if tc.want != "" {
				require.NoError(t, err)
				assert.JSONEq(t, tc.want, string(out))
				assert.Equal(t, maxTokensOf(t, out), maxTokens)
				return
			}
			var re *requestError
			require.True(t, errors.As(err, &re), "want a refusal, got %v (%s)", err, out)
			assert.Equal(t, tc.status, re.status)
			assert.Equal(t, tc.msg, re.msg)
		})
	}
}

// FuzzRebuild feeds both rebuilders arbitrary bodies. What comes out must be
// JSON that names the host's model, keeps max_tokens under the cap, has only
// allowlisted top-level fields, and rebuilds to itself: the proxy sends only
// what it understood.
func FuzzRebuild(f *testing.F) {
	seeds := []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":1e9,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"bash","input":{"c":1}},{"type":"thinking","thinking":"x","signature":"s"},{"type":"redacted_thinking","data":"d"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"o"},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"c"}]}}],"is_error":true}]}],"tools":[{"name":"bash","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"bash"},"thinking":{"type":"enabled","budget_tokens":99999}}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"r"}],"citations":{"enabled":false}}]}],"mcp_servers":[{"url":"x"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}},{"type":"input_audio","input_audio":{"data":"a","format":"wav"}},{"type":"file","file":{"file_data":"d","filename":"f"}}]},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}],"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"o"}],"max_completion_tokens":7,"stop":"x","tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_object"}}`,
		`{"MAX_TOKENS":3,"Messages":[{"ROLE":"user","Content":"x","content":"y"}],"model":1}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	anthropicKeys := set("model", "messages", "system", "max_tokens", "tools", "tool_choice", "temperature", "top_p", "top_k",
		"stop_sequences", "stream", "metadata", "thinking")
	openaiKeys := set("model", "messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls",
		"temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "stop", "stream", "stream_options",
		"response_format", "reasoning_effort")
	f.Fuzz(func(t *testing.T, body []byte, openai bool) {
		rebuild := func(b []byte) ([]byte, int64, error) { return rebuildAnthropic(b, false, testPolicy) }
		keys := anthropicKeys
		if openai {
			rebuild = func(b []byte) ([]byte, int64, error) { return rebuildOpenAI(b, testPolicy) }
			keys = openaiKeys
		}
		out, maxTokens, err := rebuild(body)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || (re.status != 400 && re.status != 403) {
				t.Fatalf("error is not a 400 or 403: %v", err)
			}
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(out, &top); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		for k := range top {
			if !keys[k] {
				t.Fatalf("field %q passed: %s", k, out)
			}
		}
		if string(top["model"]) != `"claude-host"` {
			t.Fatalf("model is %s", top["model"])
		}
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			if v, ok := top[k]; ok {
				var n int64
				if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > testPolicy.MaxTokens {
					t.Fatalf("%s is %s", k, v)
				}
			}
		}
		if got := maxTokensOf(t, out); maxTokens != got {
			t.Fatalf("returned max_tokens %d, the request says %d: %s", maxTokens, got, out)
		}
		again, _, err := rebuild(out)
		if err != nil {
			t.Fatalf("the rebuilt request is refused: %v\n%s", err, out)
		}
		if string(again) != string(out) {
			t.Fatalf("rebuilding is not stable:\n%s\n%s", out, again)
		}
	})
}

// maxTokensOf is the most output a rebuilt request allows: the larger of
// max_tokens and max_completion_tokens (0 without either).
func maxTokensOf(t testing.TB, body []byte) int64 {
	var v struct {
		MaxTokens           int64 `json:"max_tokens"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("rebuilt body: %v", err)
	}
	return max(v.MaxTokens, v.MaxCompletionTokens)
}
