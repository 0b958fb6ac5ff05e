package authz

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	mainCaller  = Caller{Group: "main", ChatID: 42, IsMain: true}
	groupCaller = Caller{Group: "family", ChatID: -100, IsMain: false}
)

type tc struct {
	name   string
	caller Caller
	op     string
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
	for _, op := range []string{UpdateTask, PauseTask, ResumeTask, CancelTask} {
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

		// unknown operations fail closed
		{"main unknown op", mainCaller, "delete_everything", Target{}, false},
		{"group unknown op", groupCaller, "delete_everything", Target{}, false},
	}...)

	covered := map[string]map[bool]bool{}
	for _, c := range cases {
		t.Run(c.op+"/"+c.name, func(t *testing.T) {
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

func TestTaskScope(t *testing.T) {
	assert.Equal(t, "", TaskScope(mainCaller))
	assert.Equal(t, "family", TaskScope(groupCaller))
}
