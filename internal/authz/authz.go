// Package authz is DESIGN.md's authorization table as one pure function. The
// caller's identity comes from the socket a request arrived on; the target
// facts come from the host's own records, never from the request's claims.
package authz

import "fmt"

// Operations on the host socket.
const (
	SendMessage   = "send_message"
	ScheduleTask  = "schedule_task"
	UpdateTask    = "update_task"
	ListTasks     = "list_tasks"
	PauseTask     = "pause_task"
	ResumeTask    = "resume_task"
	CancelTask    = "cancel_task"
	RegisterGroup = "register_group"
	ListChats     = "list_chats"
)

// Operations lists every operation the table covers.
var Operations = []string{SendMessage, ScheduleTask, UpdateTask, ListTasks, PauseTask, ResumeTask, CancelTask, RegisterGroup, ListChats}

// Caller is who asks: the group bound to the socket.
type Caller struct {
	Group  string // folder
	ChatID int64
	IsMain bool
}

// Target is what the request would touch, resolved by the host.
type Target struct {
	ChatID              int64  // send_message: the destination chat
	ChatRegistered      bool   // send_message: the destination is a registered group's chat
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

// Authorize decides one request. It does no I/O.
func Authorize(c Caller, op string, t Target) Decision {
	switch op {
	case SendMessage:
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
	default:
		return deny("unknown operation %q", op)
	}
}

// TaskScope says whose tasks list_tasks returns: "" for all, else a folder.
func TaskScope(c Caller) string {
	if c.IsMain {
		return ""
	}
	return c.Group
}
