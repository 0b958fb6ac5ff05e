package domain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeJob(t *testing.T) {
	valid := `{"v":1,"group":"team","chat_id":-100,"is_main":false,"assistant_name":"Andy","provider":"anthropic","model":"m","context_mode":"group","prompt":"hi"}`
	tests := []struct {
		name    string
		in      string
		want    Job
		wantErr string
	}{
		{name: "valid", in: valid, want: Job{Version: 1, Group: "team", ChatID: -100, AssistantName: "Andy",
			Provider: "anthropic", Model: "m", ContextMode: "group", Prompt: "hi"}},
		{name: "trailing newline", in: valid + "\n", want: Job{Version: 1, Group: "team", ChatID: -100, AssistantName: "Andy",
			Provider: "anthropic", Model: "m", ContextMode: "group", Prompt: "hi"}},
		{name: "empty", in: "", wantErr: "decode job"},
		{name: "not json", in: "hello", wantErr: "decode job"},
		{name: "unknown field", in: `{"v":1,"group":"g","prompt":"p","context_mode":"group","x":1}`, wantErr: `unknown object member name "x"`},
		{name: "name in another case", in: `{"v":1,"Group":"g","prompt":"p","context_mode":"group"}`, wantErr: `unknown object member name "Group"`},
		{name: "duplicate name", in: `{"v":1,"group":"g","group":"main","prompt":"p","context_mode":"group"}`, wantErr: "duplicate"},
		{name: "trailing object", in: valid + `{}`, wantErr: "after top-level value"},
		{name: "wrong version", in: `{"v":2,"group":"g","prompt":"p","context_mode":"group"}`, wantErr: "job version 2, want 1"},
		{name: "no group", in: `{"v":1,"prompt":"p","context_mode":"group"}`, wantErr: "no group"},
		{name: "no prompt", in: `{"v":1,"group":"g","context_mode":"group"}`, wantErr: "no prompt"},
		{name: "no model", in: `{"v":1,"group":"g","prompt":"p","context_mode":"group"}`, wantErr: "no model"},
		{name: "bad mode", in: `{"v":1,"group":"g","prompt":"p","model":"m","context_mode":"x"}`, wantErr: "context_mode"},
		{name: "bad provider", in: `{"v":1,"group":"g","prompt":"p","model":"m","context_mode":"isolated","provider":"x"}`, wantErr: "provider"},
		{name: "wrong type", in: `{"v":"1","group":"g","prompt":"p","context_mode":"group"}`, wantErr: "decode job"},
		{name: "too large", in: `{"v":1,"group":"g","context_mode":"group","prompt":"` + strings.Repeat("a", MaxJobBytes) + `"}`, wantErr: "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeJob(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		in      string
		want    Event
		wantErr bool
	}{
		{`{"type":"ready"}`, Event{Type: EventReady}, false},
		{`{"type":"result","text":"hi"}`, Event{Type: EventResult, Text: "hi"}, false},
		{`{"type":"error","error":"boom"}`, Event{Type: EventError, Error: "boom"}, false},
		{`{"type":"progress","text":"tool: bash"}`, Event{Type: EventProgress, Text: "tool: bash"}, false},
		{`{"type":"shell"}`, Event{}, true},
		{`hello`, Event{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEvent([]byte(tt.in))
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzDecodeJob(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"group":"g","prompt":"p","context_mode":"group"}`,
		`{"v":1,"group":"g","prompt":"p","context_mode":"isolated","provider":"openai","max_turns":3}`,
		``, `null`, `[]`, `{"v":1e400}`, `{"v":1}{"v":1}`, `{"prompt":"\ud800"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		j, err := DecodeJob(strings.NewReader(in))
		if err != nil {
			return
		}
		// Whatever decodes is valid and survives a round trip.
		require.NoError(t, j.Validate())
		b, err := json.Marshal(j)
		require.NoError(t, err)
		again, err := DecodeJob(strings.NewReader(string(b)))
		require.NoError(t, err)
		assert.Equal(t, j, again)
	})
}
