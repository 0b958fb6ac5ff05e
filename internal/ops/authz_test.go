package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

var (
	mainCaller  = domain.Caller{Group: "main", ChatID: 42, IsMain: true, Run: "run-1"}
	groupCaller = domain.Caller{Group: "family", ChatID: -100, IsMain: false, Run: "run-2"}
)

type tc struct {
	name   string
	caller domain.Caller
	op     Op
	target Target
	allow  bool
}

// TestTable covers every cell of DESIGN.md's authorization table for every
// operation: each operation from main and from a non-main group, against its
// own target, another group's, an unregistered one and the main group's.
func TestTable(t *testing.T) {
	cases := []tc{
		// send_message
		{"main to own chat", mainCaller, SendMessage, Target{ChatID: 42}, true},
		{"main to other registered chat", mainCaller, SendMessage, Target{ChatID: -100, ChatRegistered: true}, true},
		{"main to unregistered chat", mainCaller, SendMessage, Target{ChatID: -999}, false},
		{"group to own chat", groupCaller, SendMessage, Target{ChatID: -100, ChatRegistered: true}, true},
		{"group to other registered chat", groupCaller, SendMessage, Target{ChatID: -200, ChatRegistered: true}, false},
		{"group to unregistered chat", groupCaller, SendMessage, Target{ChatID: -999}, false},
		{"group to main chat", groupCaller, SendMessage, Target{ChatID: 42, ChatRegistered: true}, false},

		// send_file: as send_message
		{"main file to own chat", mainCaller, SendFile, Target{ChatID: 42}, true},
		{"main file to other registered chat", mainCaller, SendFile, Target{ChatID: -100, ChatRegistered: true}, true},
		{"main file to unregistered chat", mainCaller, SendFile, Target{ChatID: -999}, false},
		{"group file to own chat", groupCaller, SendFile, Target{ChatID: -100, ChatRegistered: true}, true},
		{"group file to other registered chat", groupCaller, SendFile, Target{ChatID: -200, ChatRegistered: true}, false},
		{"group file to main chat", groupCaller, SendFile, Target{ChatID: 42, ChatRegistered: true}, false},

		// schedule_task
		{"main for itself", mainCaller, ScheduleTask, Target{Group: "main", GroupRegistered: true}, true},
		{"main for another group", mainCaller, ScheduleTask, Target{Group: "family", GroupRegistered: true}, true},
		{"main for unknown group", mainCaller, ScheduleTask, Target{Group: "nope"}, false},
		{"group for itself", groupCaller, ScheduleTask, Target{Group: "family", GroupRegistered: true}, true},
		{"group for another group", groupCaller, ScheduleTask, Target{Group: "work", GroupRegistered: true}, false},
		{"group for main", groupCaller, ScheduleTask, Target{Group: "main", GroupRegistered: true}, false},
		{"group for unknown group", groupCaller, ScheduleTask, Target{Group: "nope"}, false},

		// list_tasks: always allowed, the scope differs (TestTaskScope)
		{"main lists", mainCaller, ListTasks, Target{}, true},
		{"group lists", groupCaller, ListTasks, Target{}, true},
	}
	for _, op := range []Op{UpdateTask, PauseTask, ResumeTask, CancelTask} {
		cases = append(cases,
			tc{"main on own task", mainCaller, op, Target{Group: "main"}, true},
			tc{"main on another group's task", mainCaller, op, Target{Group: "family"}, true},
			tc{"group on own task", groupCaller, op, Target{Group: "family"}, true},
			tc{"group on another group's task", groupCaller, op, Target{Group: "work"}, false},
			tc{"group on main's task", groupCaller, op, Target{Group: "main"}, false},
		)
	}
	cases = append(cases, []tc{
		// register_group
		{"main registers a group", mainCaller, RegisterGroup, Target{}, true},
		{"main tries to make a group main", mainCaller, RegisterGroup, Target{MakesMain: true}, false},
		{"main tries to register the owner's chat", mainCaller, RegisterGroup, Target{RegistersChatOfMain: true}, false},
		{"group registers a group", groupCaller, RegisterGroup, Target{}, false},
		{"group tries to make itself main", groupCaller, RegisterGroup, Target{MakesMain: true}, false},

		// list_chats
		{"main lists chats", mainCaller, ListChats, Target{}, true},
		{"group lists chats", groupCaller, ListChats, Target{}, false},

		// unregister_group: the owner's alone
		{"main unregisters a group", mainCaller, UnregisterGroup, Target{}, false},
		{"group unregisters a group", groupCaller, UnregisterGroup, Target{}, false},

		// set_profile: the owner's alone
		{"main sets a profile", mainCaller, SetProfile, Target{Group: "family"}, false},
		{"main sets its own profile", mainCaller, SetProfile, Target{Group: "main"}, false},
		{"group sets its own profile", groupCaller, SetProfile, Target{Group: "family"}, false},
		{"main revokes an allowed destination", mainCaller, RevokeEgress, Target{Group: "family"}, false},
		{"group revokes its own allowed destination", groupCaller, RevokeEgress, Target{Group: "family"}, false},

		// unknown operations fail closed
		{"main unknown op", mainCaller, Op("delete_everything"), Target{}, false},
		{"group unknown op", groupCaller, Op("delete_everything"), Target{}, false},
	}...)

	covered := map[Op]map[bool]bool{}
	for _, c := range cases {
		t.Run(string(c.op)+"/"+c.name, func(t *testing.T) {
			d := Authorize(c.caller, c.op, c.target)
			assert.Equal(t, c.allow, d.Allow, d.Reason)
			assert.NotEmpty(t, d.Reason, "every decision says why")
		})
		if covered[c.op] == nil {
			covered[c.op] = map[bool]bool{}
		}
		covered[c.op][c.caller.IsMain] = true
	}
	for _, op := range Operations {
		assert.True(t, covered[op][true] && covered[op][false], "operation %s must be tested from main and non-main", op)
	}
	t.Logf("%d authorization cases", len(cases))
}

// The owner (a chat command in main, the CLI) may do every operation. Only
// the owner's chat and the CLI make such a caller; a socket's caller is
// never the owner, whatever its group.
func TestOwnerMayDoEverything(t *testing.T) {
	for _, op := range Operations {
		d := Authorize(domain.Owner(), op, Target{Group: "family"})
		assert.True(t, d.Allow, "%s: %s", op, d.Reason)
	}
	assert.False(t, mainCaller.Owner, "main's agent is not the owner")
	assert.False(t, domain.Group{Folder: domain.MainFolder}.Caller("run").Owner, "nor is any group's run")
}

func TestTaskScope(t *testing.T) {
	assert.Equal(t, "", TaskScope(mainCaller))
	assert.Equal(t, "family", TaskScope(groupCaller))
}
