package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeToolInput(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    bashArgs
		wantErr string
	}{
		{name: "ok", raw: `{"command":"ls"}`, want: bashArgs{Command: "ls"}},
		{name: "with timeout", raw: ` {"command":"ls","timeout_s":5} `, want: bashArgs{Command: "ls", TimeoutS: ptr(5.0)}},
		{name: "unknown field", raw: `{"command":"ls","cmd":"x"}`, wantErr: `unknown argument "cmd"`},
		{name: "wrong type", raw: `{"command":5}`, wantErr: `argument "command" must be of type string, got number`},
		{name: "missing required", raw: `{}`, wantErr: "missing required argument(s): command"},
		{name: "null required", raw: `{"command":null}`, wantErr: "missing required argument(s): command"},
		{name: "empty input", raw: ``, wantErr: "missing required argument(s): command"},
		{name: "not an object", raw: `["ls"]`, wantErr: "arguments must be a JSON object"},
		{name: "a string", raw: `"ls"`, wantErr: "arguments must be a JSON object"},
		{name: "broken json", raw: `{"command":`, wantErr: "not a valid JSON object"},
		{name: "trailing data", raw: `{"command":"ls"} {}`, wantErr: "not a valid JSON object"},
		{name: "name in another case", raw: `{"command":"ls","Timeout_S":5}`, wantErr: `unknown argument "Timeout_S"`},
		{name: "duplicate name", raw: `{"command":"ls","command":"rm -rf /"}`, wantErr: "duplicate"},
		{name: "wrong type behind a pointer", raw: `{"command":"ls","timeout_s":"5"}`, wantErr: `argument "timeout_s" must be of type number, got string`},
		{name: "boolean for a string", raw: `{"command":true}`, wantErr: `argument "command" must be of type string, got boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bashArgs
			err := DecodeToolInput([]byte(tt.raw), &got, "command")
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

func TestCheckToolInput(t *testing.T) {
	tests := []struct {
		tool, raw, wantErr string
	}{
		{"list_tasks", `{}`, ""},
		{"list_tasks", `null`, ""},
		{"list_tasks", `{"all":true}`, `unknown argument "all"`},
		{"pause_task", `{"task_id":"7"}`, `argument "task_id" must be of type integer, got string`},
		{"pause_task", `{"task_id":7}`, ""},
		{"send_message", `{"text":"hi","chat_id":-1001}`, ""},
		{"send_message", `{"chat_id":1}`, "missing required argument(s): text"},
		{"schedule_task", `{"prompt":"p","schedule_type":"cron","schedule_value":"* * * * *","context_mode":"isolated"}`, ""},
		{"register_group", `{"chat_id":1,"name":"n"}`, "missing required argument(s): folder"},
		{"write_file", `{"path":"a","content":""}`, ""},
		{"edit_file", `{"path":"a","old_text":"x"}`, "missing required argument(s): new_text"},
		{"nosuch", `{}`, `unknown tool "nosuch"`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.raw, func(t *testing.T) {
			err := CheckToolInput(tt.tool, []byte(tt.raw))
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestToolNamesMatchDesign(t *testing.T) {
	assert.Equal(t, []string{
		"bash", "read_file", "write_file", "edit_file", "list_files", "send_message", "send_file",
		"schedule_task", "list_tasks", "pause_task", "resume_task", "cancel_task",
		"register_group", "list_chats",
	}, ToolNames())
}

func FuzzDecodeToolInput(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ls"}`, `{"path":"a","offset":1,"limit":2}`, `{"task_id":1}`, `null`, ``, `[]`,
		`{"chat_id":1e99}`, `{"text":"\u0000"}`, `{"command":"ls"}{}`, `{"timeout_s":-1,"command":"x"}`, `{"a":{"b":[1,2]}}`,
	} {
		f.Add(seed)
	}
	names := ToolNames()
	f.Fuzz(func(t *testing.T, raw string) {
		for _, name := range names {
			_ = CheckToolInput(name, []byte(raw)) // must never panic
		}
	})
}

func ptr[T any](v T) *T { return &v }
