// Package domain holds the types every other package speaks: chats, messages,
// groups, tasks and audit entries. It knows nothing of Telegram, SQLite or sandboxes.
package domain

import (
	"encoding/json"
	"time"
)

// MainFolder is the folder of the owner's private chat, the one trusted group.
const MainFolder = "main"

// GlobalFolder holds memory shared by all groups (read-only for non-main).
const GlobalFolder = "global"

// Chat is any chat the bot has seen, registered or not. Only metadata is kept.
type Chat struct {
	ID       int64     `json:"id"`
	Title    string    `json:"title"`
	Type     string    `json:"type"` // private, group, supergroup, channel
	LastSeen time.Time `json:"last_seen"`
}

// Message is one stored message of a registered group.
type Message struct {
	Seq        int64     `json:"seq"`        // store-assigned, monotonically increasing; the cursor unit
	ChatID     int64     `json:"chat_id"`    // Telegram chat id
	MessageID  int64     `json:"message_id"` // Telegram message id, unique within a chat
	ThreadID   int       `json:"thread_id,omitempty"`
	SenderID   int64     `json:"sender_id"`
	SenderName string    `json:"sender_name"`
	Text       string    `json:"text"`
	Time       time.Time `json:"time"`
	FromBot    bool      `json:"from_bot,omitempty"` // the assistant's own outgoing messages
	// Triggered is decided when the message arrives (trigger word, mention of
	// the bot, reply to the bot) and stored, so a restart knows which pending
	// messages still await an answer.
	Triggered bool `json:"triggered,omitempty"`
}

// MountRequest is an extra host folder a group asks for (validated against the allowlist).
type MountRequest struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readonly"`
	// WritePaths are sub-paths (relative to HostPath) of a read-only mount
	// that are bound read-write, as sandboxed coding agents need it.
	WritePaths []string `json:"writePaths,omitempty"`
}

// Group is a registered chat: its folder is its identity inside clawpen.
type Group struct {
	ChatID  int64           `json:"chat_id"`
	Name    string          `json:"name"`
	Folder  string          `json:"folder"`
	Trigger string          `json:"trigger,omitempty"` // empty: "@" + assistant name
	Profile string          `json:"profile,omitempty"` // sandbox profile name
	Mounts  []MountRequest  `json:"mounts,omitempty"`
	Policy  json.RawMessage `json:"policy,omitempty"` // sender policy (issue 4), raw so a malformed one fails closed where it is read
	Added   time.Time       `json:"added"`
}

// IsMain reports whether g is the owner's private chat.
func (g Group) IsMain() bool { return g.Folder == MainFolder }

// Task schedule types and context modes.
const (
	ScheduleCron     = "cron"
	ScheduleInterval = "interval"
	ScheduleOnce     = "once"

	ContextGroup    = "group"
	ContextIsolated = "isolated"

	TaskActive    = "active"
	TaskPaused    = "paused"
	TaskCompleted = "completed"
	TaskCancelled = "cancelled"
)

// Task is a scheduled prompt that runs as its group.
type Task struct {
	ID            int64     `json:"id"`
	Group         string    `json:"group"` // folder
	ChatID        int64     `json:"chat_id"`
	Prompt        string    `json:"prompt"`
	ScheduleType  string    `json:"schedule_type"`
	ScheduleValue string    `json:"schedule_value"`
	ContextMode   string    `json:"context_mode"`
	Status        string    `json:"status"`
	NextRun       time.Time `json:"next_run"`
	LastRun       time.Time `json:"last_run,omitzero"`
	Created       time.Time `json:"created"`
}

// TaskRun is the log of one execution of a task.
type TaskRun struct {
	ID       int64         `json:"id"`
	TaskID   int64         `json:"task_id"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	Status   string        `json:"status"` // ok, error
	Result   string        `json:"result,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// AuditEntry records a security-relevant decision of the host.
type AuditEntry struct {
	ID        int64     `json:"id"`
	Time      time.Time `json:"time"`
	Group     string    `json:"group"`     // folder of the caller, or "" for the host itself
	Operation string    `json:"operation"` // e.g. "ipc.send_message", "sandbox.start", "telegram.private"
	Decision  string    `json:"decision"`  // "allow", "deny", "error"
	Reason    string    `json:"reason"`
}

// Outgoing is one answer waiting in the outbox to be delivered to a chat.
type Outgoing struct {
	ID       int64     `json:"id"`
	ChatID   int64     `json:"chat_id"`
	ThreadID int       `json:"thread_id,omitempty"`
	Text     string    `json:"text"`
	Created  time.Time `json:"created"`
}
