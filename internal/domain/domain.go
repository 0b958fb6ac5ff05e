// Package domain holds the types every other package speaks: chats, messages,
// groups and their sender policies, tasks, audit entries, and the job an agent
// is given with the events it answers (job.go, the host-agent protocol). It
// knows nothing of Telegram, SQLite or sandbox backends.
package domain

import (
	"encoding/json"
	"errors"
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
	// Triggered is decided when the message arrives (trigger word, mention of
	// the bot, reply to the bot) and stored, so a restart knows which pending
	// messages still await an answer.
	Triggered bool `json:"triggered,omitempty"`
	// Attachment is the file the message carried, if any.
	Attachment *Attachment `json:"attachment,omitempty"`
	// FileToFetch is the Telegram file id of Attachment still to be fetched
	// into Attachment.Path; "" once it was fetched or given up. A run waits
	// until its messages hold no such file.
	FileToFetch string `json:"-"`
}

// Attachment is a file a message carried, as the agent is told of it.
type Attachment struct {
	Type string `json:"type"` // photo, document, voice, audio, video
	// Path is where the agent finds it (/workspace/group/inbox/…); "" when
	// the host did not fetch it (Note says why).
	Path string `json:"path,omitempty"`
	Name string `json:"name,omitempty"` // the sender's file name: untrusted, shown escaped
	Note string `json:"note,omitempty"` // e.g. too large
	// Speech marks a voice note, audio file or video note: the host
	// transcribes it when it is set up to.
	Speech bool `json:"speech,omitempty"`
	// Transcript is what the host's transcriber heard: the sender's
	// words, untrusted, shown escaped.
	Transcript string `json:"transcript,omitempty"`
}

// ErrFileTooLarge is a file users sent that is over the host's cap.
var ErrFileTooLarge = errors.New("file is larger than the cap")

// InFile is a file in an incoming message, before the host fetched it.
type InFile struct {
	Type string // photo, document, voice, audio, video
	Name string // the sender's file name: untrusted
	MIME string // the sender's claim: untrusted
	// Speech marks a voice note, audio file or video note (a video note
	// is of Type video): recorded speech the host may transcribe.
	Speech bool
	// Sizes are the versions Telegram offers, largest first (a photo comes
	// in several; anything else in one). Bytes 0 is unknown.
	Sizes []FileVersion
}

// FileVersion is one version of an incoming file.
type FileVersion struct {
	ID    string
	Bytes int64
}

// Inbound is one message as the chat adapter (Telegram) saw it, before the
// router decides what it is: stored as a Message, a command, or nothing.
type Inbound struct {
	ChatID            int64
	ChatType          string // private, group, supergroup, channel
	ChatTitle         string // group title, or the other person's name in a private chat
	MessageID         int64
	ThreadID          int // the forum topic to answer in; 0 outside a topic
	SenderID          int64
	SenderName        string // first + last name, else @username
	SenderIsBot       bool
	Text              string  // text, or the caption of a media message
	Media             string  // what a message without text holds, in words ("sticker"); "" otherwise
	File              *InFile // a photo, document, voice note, audio or video the host may fetch
	Time              time.Time
	MentionsBot       bool  // an @mention of the bot (or a text_mention of it)
	ReplyToBot        bool  // a reply to one of the bot's messages
	MigrateToChatID   int64 // service message: this group became that supergroup
	MigrateFromChatID int64 // service message: this supergroup was that group
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
	Policy  json.RawMessage `json:"policy,omitempty"` // sender policy, raw so a malformed one fails closed where it is read
	Added   time.Time       `json:"added"`
}

// IsMain reports whether g is the owner's private chat.
func (g Group) IsMain() bool { return g.Folder == MainFolder }

// Caller is who asks the host for an operation on tasks, groups or chats:
// an agent run, known by the socket its request arrived on (never by what
// the request claims), or the owner, through a chat command in main or the
// CLI. The socket and authorization speak only this type.
type Caller struct {
	Group  string // folder
	ChatID int64
	IsMain bool
	// Run is the agent run (invocation id) a socket serves: quotas and the
	// audit log's budget are per run.
	Run string
	// Owner marks the owner's own commands. Only the owner's chat and the
	// CLI set it; a socket never does, so an agent can never be the owner.
	Owner bool
}

// Caller is g asking, from its agent run run.
func (g Group) Caller(run string) Caller {
	return Caller{Group: g.Folder, ChatID: g.ChatID, IsMain: g.IsMain(), Run: run}
}

// Owner is the owner asking: in the main chat, or on the CLI.
func Owner() Caller { return Caller{Group: MainFolder, IsMain: true, Owner: true} }

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
	Group     string    `json:"group"`            // folder of the caller, or "" for the host itself
	Operation string    `json:"operation"`        // e.g. "ipc.send_message", "sandbox.start", "telegram.private"
	Target    string    `json:"target,omitempty"` // what the operation was about: an egress destination, a tool, a task
	Decision  string    `json:"decision"`         // "allow", "deny", "error"
	Reason    string    `json:"reason"`
}

// Outgoing is one answer waiting in the outbox to be delivered to a chat.
type Outgoing struct {
	ID       int64     `json:"id"`
	ChatID   int64     `json:"chat_id"`
	ThreadID int       `json:"thread_id,omitempty"`
	Text     string    `json:"text"` // a file's caption
	Created  time.Time `json:"created"`
	// Kind is how a file is sent (OutPhoto, OutDocument); "" is text. The
	// file's bytes are in the store, apart from the row.
	Kind     string `json:"kind,omitempty"`
	FileName string `json:"file_name,omitempty"`
}

// Kinds of outgoing files.
const (
	OutPhoto    = "photo"
	OutDocument = "document"
)
