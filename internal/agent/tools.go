package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxToolResult caps what one tool call hands back to the model.
const MaxToolResult = 64 << 10

// tool is one tool the model may call.
type tool struct {
	def   ToolDef
	check func(raw []byte) error // strict decoding only, no effects
	run   func(ctx context.Context, raw []byte) (string, error)
}

// newTool ties a tool's definition to its typed, strictly decoded arguments.
func newTool[T any](def ToolDef, run func(ctx context.Context, args T) (string, error)) tool {
	decode := func(raw []byte) (T, error) {
		var args T
		err := DecodeToolInput(raw, &args, def.Required...)
		return args, err
	}
	return tool{
		def: def,
		check: func(raw []byte) error {
			_, err := decode(raw)
			return err
		},
		run: func(ctx context.Context, raw []byte) (string, error) {
			args, err := decode(raw)
			if err != nil {
				return "", fmt.Errorf("%s: %w", def.Name, err)
			}
			return run(ctx, args)
		},
	}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func integer(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}

// Tool argument types; field names are the contract in DESIGN.md ("Agent runner").
type (
	bashArgs struct {
		Command  string   `json:"command"`
		TimeoutS *float64 `json:"timeout_s"`
	}
	readFileArgs struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	writeFileArgs struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	editFileArgs struct {
		Path    string `json:"path"`
		OldText string `json:"old_text"`
		NewText string `json:"new_text"`
	}
	listFilesArgs struct {
		Path    string `json:"path"`
		Pattern string `json:"pattern"`
	}
	sendMessageArgs struct {
		Text   string `json:"text"`
		ChatID *int64 `json:"chat_id,omitempty"`
	}
	sendFileArgs struct {
		Path    string `json:"path"`
		Caption string `json:"caption,omitempty"`
		ChatID  *int64 `json:"chat_id,omitempty"`
	}
	scheduleTaskArgs struct {
		Prompt        string `json:"prompt"`
		ScheduleType  string `json:"schedule_type"`
		ScheduleValue string `json:"schedule_value"`
		Group         string `json:"group,omitempty"`
		ContextMode   string `json:"context_mode,omitempty"`
	}
	noArgs     struct{}
	taskIDArgs struct {
		TaskID int64 `json:"task_id"`
	}
	registerGroupArgs struct {
		ChatID  int64             `json:"chat_id"`
		Name    string            `json:"name"`
		Folder  string            `json:"folder"`
		Trigger string            `json:"trigger,omitempty"`
		Mounts  []json.RawMessage `json:"mounts,omitempty"` // checked by the host
	}
)

// toolSet builds the tools of one run.
func (a *runner) toolSet() []tool {
	ipc := func(name string) func(ctx context.Context, args any) (string, error) {
		return func(ctx context.Context, args any) (string, error) { return a.callHost(ctx, name, args) }
	}
	taskTool := func(name, desc string) tool {
		return newTool(ToolDef{Name: name, Description: desc,
			Properties: map[string]any{"task_id": integer("the task's id (see list_tasks)")},
			Required:   []string{"task_id"}},
			func(ctx context.Context, args taskIDArgs) (string, error) { return ipc(name)(ctx, args) })
	}
	return []tool{
		newTool(ToolDef{Name: "bash",
			Description: "Run a shell command in the group folder (/workspace/group). Output (stdout and stderr) is capped at 64 KiB. Default timeout 120 s, at most 600 s; on timeout the whole process group is killed.",
			Properties: map[string]any{
				"command":   str("the command line, run with bash -c (sh when bash is missing)"),
				"timeout_s": map[string]any{"type": "number", "description": "timeout in seconds (default 120, max 600)"},
			},
			Required: []string{"command"}}, a.bash),
		newTool(ToolDef{Name: "read_file",
			Description: "Read a text file. Relative paths are relative to /workspace/group. offset is the first line to read (1-based), limit the number of lines (default 2000).",
			Properties: map[string]any{
				"path":   str("file path"),
				"offset": integer("first line to read, 1-based (default 1)"),
				"limit":  integer("number of lines to read (default 2000)"),
			},
			Required: []string{"path"}}, a.readFile),
		newTool(ToolDef{Name: "write_file",
			Description: "Create or overwrite a file with the given content; parent directories are created.",
			Properties:  map[string]any{"path": str("file path"), "content": str("the complete new content")},
			Required:    []string{"path", "content"}}, a.writeFile),
		newTool(ToolDef{Name: "edit_file",
			Description: "Replace old_text with new_text in a file. old_text must occur exactly once.",
			Properties: map[string]any{
				"path": str("file path"), "old_text": str("exact text to replace, unique in the file"), "new_text": str("replacement text"),
			},
			Required: []string{"path", "old_text", "new_text"}}, a.editFile),
		newTool(ToolDef{Name: "list_files",
			Description: "List files recursively under path (default /workspace/group). pattern is a glob matched against base names, e.g. *.md.",
			Properties:  map[string]any{"path": str("directory (default /workspace/group)"), "pattern": str("glob on file names, e.g. *.go")}},
			a.listFiles),
		newTool(ToolDef{Name: "send_message",
			Description: "Send a message to a chat now (default: this group's chat), e.g. for progress during long work. Your final answer is sent anyway; do not repeat it here.",
			Properties:  map[string]any{"text": str("message text"), "chat_id": integer("numeric Telegram chat id (default: this chat)")},
			Required:    []string{"text"}},
			func(ctx context.Context, args sendMessageArgs) (string, error) { return ipc("send_message")(ctx, args) }),
		newTool(ToolDef{Name: "send_file",
			Description: "Send a file from your workspace to a chat (default: this group's chat): JPEG, PNG or WebP images up to 10 MB as a photo, anything else up to 50 MB as a document. The host reads it when you call, so write it first; symlinks are not followed.",
			Properties:  map[string]any{"path": str("absolute path under /workspace/group/ or /workspace/extra/<name>/"), "caption": str("optional caption, up to 1024 characters"), "chat_id": integer("numeric Telegram chat id (default: this chat)")},
			Required:    []string{"path"}},
			func(ctx context.Context, args sendFileArgs) (string, error) { return ipc("send_file")(ctx, args) }),
		newTool(ToolDef{Name: "schedule_task",
			Description: "Schedule a prompt to run later as the agent of a group; its output goes to that group's chat. cron: robfig/cron expression; interval: Go duration like 30m; once: RFC 3339 time.",
			Properties: map[string]any{
				"prompt":         str("what the agent should do when the task runs"),
				"schedule_type":  map[string]any{"type": "string", "enum": []string{"cron", "interval", "once"}},
				"schedule_value": str("cron expression, duration, or RFC 3339 time"),
				"group":          str("folder of the group to run as (default: this group)"),
				"context_mode":   map[string]any{"type": "string", "enum": []string{"group", "isolated"}, "description": "group: share the group's conversation (default); isolated: start fresh"},
			},
			Required: []string{"prompt", "schedule_type", "schedule_value"}},
			func(ctx context.Context, args scheduleTaskArgs) (string, error) {
				return ipc("schedule_task")(ctx, args)
			}),
		newTool(ToolDef{Name: "list_tasks", Description: "List scheduled tasks (JSON array).", Properties: map[string]any{}},
			func(ctx context.Context, args noArgs) (string, error) { return ipc("list_tasks")(ctx, args) }),
		taskTool("pause_task", "Pause a scheduled task."),
		taskTool("resume_task", "Resume a paused task."),
		taskTool("cancel_task", "Cancel a scheduled task for good."),
		newTool(ToolDef{Name: "register_group",
			Description: "Register a Telegram chat as a group with its own folder (main group only).",
			Properties: map[string]any{
				"chat_id": integer("numeric Telegram chat id"), "name": str("display name"),
				"folder": str("folder name: lowercase letters, digits, - and _"), "trigger": str("trigger word (default @<assistant name>)"),
				"mounts": map[string]any{"type": "array", "description": "extra host folders, checked against the owner's mount allowlist",
					"items": map[string]any{"type": "object", "properties": map[string]any{
						"hostPath": str("host path"), "containerPath": str("name under /workspace/extra/"),
						"readonly": map[string]any{"type": "boolean", "description": "default true"},
					}, "required": []string{"hostPath", "containerPath"}}},
			},
			Required: []string{"chat_id", "name", "folder"}},
			func(ctx context.Context, args registerGroupArgs) (string, error) {
				return ipc("register_group")(ctx, args)
			}),
		newTool(ToolDef{Name: "list_chats", Description: "List the chats the bot has seen (main group only).", Properties: map[string]any{}},
			func(ctx context.Context, args noArgs) (string, error) { return ipc("list_chats")(ctx, args) }),
	}
}

// runTool executes one tool call; a failure is a result for the model, never a crash.
func (a *runner) runTool(ctx context.Context, tools []tool, name string, input []byte) (text string, isError bool) {
	idx := slices.IndexFunc(tools, func(t tool) bool { return t.def.Name == name })
	if idx < 0 {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.def.Name
		}
		return fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(names, ", ")), true
	}
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("tool panicked", "tool", name, "panic", r)
			text, isError = fmt.Sprintf("%s: internal error: %v", name, r), true
		}
	}()
	out, err := tools[idx].run(ctx, input)
	if err != nil {
		return capText(err.Error(), MaxToolResult), true
	}
	if out == "" {
		out = "(no output)"
	}
	return capText(out, MaxToolResult), false
}

// capText cuts s to at most max bytes at a UTF-8 boundary, with a note.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated: %d bytes in total, first %d shown]", len(s), cut)
}

// toolDefs returns the definitions handed to the model.
func toolDefs(tools []tool) []ToolDef {
	out := make([]ToolDef, len(tools))
	for i, t := range tools {
		out[i] = t.def
	}
	return out
}

// marshalArgs encodes tool arguments for the host.
func marshalArgs(args any) ([]byte, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode arguments: %w", err)
	}
	return b, nil
}
