package ops

// DESIGN.md's authorization table as one pure function. The caller's
// identity comes from the socket a request arrived on (or is the owner's);
// the target facts come from the host's own records, never from the
// request's claims.

import (
	"fmt"

	"github.com/clawpen/clawpen/internal/domain"
)

// Op is an operation on tasks, groups or chats. Those an agent may ask for
// are named as DESIGN.md's tools are, and as their socket paths
// (POST /ipc/<op>).
type Op string

// Operations.
const (
	SendMessage   Op = "send_message"
	SendFile      Op = "send_file"
	ScheduleTask  Op = "schedule_task"
	UpdateTask    Op = "update_task"
	ListTasks     Op = "list_tasks"
	PauseTask     Op = "pause_task"
	ResumeTask    Op = "resume_task"
	CancelTask    Op = "cancel_task"
	RegisterGroup Op = "register_group"
	ListChats     Op = "list_chats"
	// UnregisterGroup is the owner's alone (/unregister, the CLI): no agent
	// tool asks for it.
	UnregisterGroup Op = "unregister_group"
	// SetProfile gives a group a sandbox profile: the owner's alone
	// (/profile, the CLI). A profile grants rights (network, limits, a
	// budget), so no agent, main's included, may choose its own or
	// another's.
	SetProfile Op = "set_profile"
	// RevokeEgress takes back a destination the owner allowed a group
	// ("Allow for <group>"): the owner's alone (/revoke, the CLI).
	RevokeEgress Op = "revoke_egress"
)

// Operations lists every operation the table covers.
var Operations = []Op{SendMessage, SendFile, ScheduleTask, UpdateTask, ListTasks, PauseTask, ResumeTask, CancelTask, RegisterGroup, ListChats, UnregisterGroup, SetProfile, RevokeEgress}

// Target is what the request would touch, resolved by the host.
type Target struct {
	ChatID              int64  // send_message, send_file: the destination chat
	ChatRegistered      bool   // send_message, send_file: the destination is a registered group's chat
	Group               string // schedule_task: the group to run as; task ops: the task's group
	GroupRegistered     bool   // schedule_task: that group exists
	MakesMain           bool   // register_group: the request would create or alter the main group
	RegistersChatOfMain bool   // register_group: the chat is the owner's private chat
}

// Decision is the verdict; Reason is shown to the agent (after "denied: ") and audit-logged.
type Decision struct {
	Allow  bool
	Reason string
}

func allow(reason string) Decision { return Decision{Allow: true, Reason: reason} }
func deny(format string, a ...any) Decision {
	return Decision{Reason: fmt.Sprintf(format, a...)}
}

// Authorize decides one request. It does no I/O. The owner may do anything
// (what a group may become is checked with the request itself); an agent,
// main's included, as the table says.
func Authorize(c domain.Caller, op Op, t Target) Decision {
	if c.Owner {
		return allow("the owner")
	}
	switch op {
	case SendMessage, SendFile:
		if t.ChatID == c.ChatID {
			return allow("own chat")
		}
		if !c.IsMain {
			return deny("group %q may only send messages to its own chat", c.Group)
		}
		if !t.ChatRegistered {
			return deny("chat %d is not a registered group", t.ChatID)
		}
		return allow("main may message any registered chat")
	case ScheduleTask:
		if t.Group != c.Group && !c.IsMain {
			return deny("group %q may only schedule tasks for itself, not for %q", c.Group, t.Group)
		}
		if !t.GroupRegistered {
			return deny("no registered group has the folder %q", t.Group)
		}
		if t.Group == c.Group {
			return allow("own group")
		}
		return allow("main may schedule for any group")
	case ListTasks:
		if c.IsMain {
			return allow("main sees all tasks")
		}
		return allow("own tasks only")
	case UpdateTask, PauseTask, ResumeTask, CancelTask:
		if t.Group == c.Group {
			return allow("own task")
		}
		if !c.IsMain {
			return deny("group %q may only change its own tasks; this task belongs to another group", c.Group)
		}
		return allow("main may change any task")
	case RegisterGroup:
		if !c.IsMain {
			return deny("only the main group may register groups")
		}
		if t.MakesMain || t.RegistersChatOfMain {
			return deny("the main group is the owner's private chat and cannot be registered or replaced by an agent")
		}
		return allow("main registers groups")
	case ListChats:
		if !c.IsMain {
			return deny("only the main group may list chats")
		}
		return allow("main lists chats")
	case UnregisterGroup:
		return deny("only the owner may unregister groups")
	case SetProfile:
		return deny("only the owner may set a group's sandbox profile")
	case RevokeEgress:
		return deny("only the owner may revoke what the owner allowed")
	default:
		return deny("unknown operation %q", op)
	}
}

// TaskScope says whose tasks list_tasks returns: "" for all, else a folder.
func TaskScope(c domain.Caller) string {
	if c.IsMain {
		return ""
	}
	return c.Group
}
