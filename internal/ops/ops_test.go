package ops

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

var (
	mainID   = domain.Caller{Group: "main", ChatID: 42, IsMain: true, Run: "run-main"}
	familyID = domain.Caller{Group: "family", ChatID: -100, Run: "run-family"}
)

func setup(t testing.TB) (*Service, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, g := range []domain.Group{
		{ChatID: 42, Name: "main", Folder: "main"},
		{ChatID: -100, Name: "Family", Folder: "family"},
		{ChatID: -200, Name: "Work", Folder: "work"},
	} {
		require.NoError(t, st.PutGroup(ctx, g))
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return New(Config{Store: st, GroupsDir: filepath.Join(dir, "groups"), Loc: time.UTC, MinInterval: time.Minute, Now: func() time.Time { return now }}), st
}

func ask(t *testing.T, h *Service, id domain.Caller, op, body string) (int, string) {
	t.Helper()
	status, resp := h.Handle(context.Background(), id, op, []byte(body))
	b, err := json.Marshal(resp)
	require.NoError(t, err)
	return status, string(b)
}

func TestSendMessage(t *testing.T) {
	cases := []struct {
		name   string
		id     domain.Caller
		body   string
		status int
		chat   int64
		errSub string
	}{
		{"own chat, implicit", familyID, `{"text":"hi"}`, 200, -100, ""},
		{"own chat, explicit", familyID, `{"text":"hi","chat_id":-100}`, 200, -100, ""},
		{"non-main to another group", familyID, `{"text":"hi","chat_id":-200}`, 403, 0, "denied: "},
		{"non-main to main", familyID, `{"text":"hi","chat_id":42}`, 403, 0, "denied: "},
		{"non-main to unregistered", familyID, `{"text":"hi","chat_id":-999}`, 403, 0, "denied: "},
		{"main to another group", mainID, `{"text":"hi","chat_id":-200}`, 200, -200, ""},
		{"main to unregistered", mainID, `{"text":"hi","chat_id":-999}`, 403, 0, "denied: "},
		{"identity in the body is ignored", familyID, `{"text":"hi","chat_id":-200,"group":"main"}`, 400, 0, "unknown field"},
		{"empty text", familyID, `{"text":"  "}`, 400, 0, "text is required"},
		{"wrong type", familyID, `{"text":5}`, 400, 0, `must be string, not number`},
		{"trailing data", familyID, `{"text":"a"}{"text":"b"}`, 400, 0, "after top-level value"},
		{"duplicate name", familyID, `{"text":"hi","text":"bye","chat_id":-100}`, 400, 0, "duplicate"},
		{"name in another case", familyID, `{"text":"hi","Chat_ID":-200}`, 400, 0, "Chat_ID"},
		{"invalid UTF-8", familyID, "{\"text\":\"\xff\"}", 400, 0, "invalid UTF-8"},
		{"not JSON", familyID, `hello`, 400, 0, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, st := setup(t)
			status, body := ask(t, h, c.id, "send_message", c.body)
			assert.Equal(t, c.status, status, body)
			out, err := st.PendingOutbox(context.Background())
			require.NoError(t, err)
			if c.status == 200 {
				require.Len(t, out, 1)
				assert.Equal(t, c.chat, out[0].ChatID)
				return
			}
			assert.Empty(t, out, "a refused or malformed request changes nothing")
			assert.Contains(t, body, c.errSub)
			log, err := st.AuditLog(context.Background(), 1)
			require.NoError(t, err)
			require.Len(t, log, 1, "refusals are audit-logged")
			assert.Equal(t, c.id.Group, log[0].Group)
			assert.Equal(t, "ipc.send_message", log[0].Operation)
		})
	}
}

func TestScheduleAndManageTasks(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()

	status, body := ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h"}`)
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"group":"family"`)
	assert.Contains(t, body, `"next_run":"2026-11-22T13:00:00Z"`)

	status, body = ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h","group":"work"}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, "denied: ")
	status, _ = ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h","group":"main"}`)
	assert.Equal(t, 403, status)
	status, body = ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1s"}`)
	assert.Equal(t, 400, status, body)
	status, _ = ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"weekly","schedule_value":"x"}`)
	assert.Equal(t, 400, status)
	status, _ = ask(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"once","schedule_value":"2026-11-23T09:00:00Z","context_mode":"shared"}`)
	assert.Equal(t, 400, status)

	status, body = ask(t, h, mainID, "schedule_task", `{"prompt":"for work","schedule_type":"cron","schedule_value":"0 9 * * *","group":"work","context_mode":"isolated"}`)
	require.Equal(t, 200, status, body)

	ts, err := st.ListTasks(ctx, "")
	require.NoError(t, err)
	require.Len(t, ts, 2, "only the allowed schedules were stored")
	familyTask, workTask := ts[0], ts[1]

	// list_tasks: main sees all, a group its own.
	_, body = ask(t, h, familyID, "list_tasks", `{}`)
	var views []TaskView
	require.NoError(t, json.Unmarshal([]byte(body), &views))
	require.Len(t, views, 1)
	assert.Equal(t, "family", views[0].Group)
	_, body = ask(t, h, mainID, "list_tasks", ``)
	require.NoError(t, json.Unmarshal([]byte(body), &views))
	assert.Len(t, views, 2)

	// A group may not touch another group's task.
	for _, op := range []string{"pause_task", "resume_task", "cancel_task"} {
		status, body = ask(t, h, familyID, op, `{"task_id":`+itoa(workTask.ID)+`}`)
		assert.Equal(t, 403, status, op)
		assert.Contains(t, body, "denied: ")
	}
	status, _ = ask(t, h, familyID, "update_task", `{"task_id":`+itoa(workTask.ID)+`,"prompt":"hijacked"}`)
	assert.Equal(t, 403, status)
	got, _, _ := st.Task(ctx, workTask.ID)
	assert.Equal(t, "for work", got.Prompt)
	assert.Equal(t, domain.TaskActive, got.Status)

	// Its own: pause, resume, update, cancel.
	status, body = ask(t, h, familyID, "pause_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	status, body = ask(t, h, familyID, "resume_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	status, body = ask(t, h, familyID, "update_task", `{"task_id":`+itoa(familyTask.ID)+`,"schedule_value":"2h"}`)
	require.Equal(t, 200, status, body)
	status, body = ask(t, h, familyID, "cancel_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	got, _, _ = st.Task(ctx, familyTask.ID)
	assert.Equal(t, domain.TaskCancelled, got.Status)
	assert.Equal(t, "2h", got.ScheduleValue)

	// Main may manage any group's task.
	status, body = ask(t, h, mainID, "pause_task", `{"task_id":`+itoa(workTask.ID)+`}`)
	assert.Equal(t, 200, status, body)
}

func TestRegisterAndListChats(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	status, body := ask(t, h, familyID, "register_group", `{"chat_id":-300,"name":"X","folder":"x"}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, "denied: ")
	status, _ = ask(t, h, familyID, "list_chats", `{}`)
	assert.Equal(t, 403, status)
	status, body = ask(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"main"}`)
	assert.Equal(t, 403, status, "no agent can make a group main")
	assert.Contains(t, body, "denied: ")
	status, _ = ask(t, h, mainID, "register_group", `{"chat_id":42,"name":"X","folder":"x"}`)
	assert.Equal(t, 403, status, "nor register the owner's chat")
	status, body = ask(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"../x"}`)
	assert.Equal(t, 400, status, body)
	_, ok, err := st.GroupByChat(ctx, -300)
	require.NoError(t, err)
	assert.False(t, ok, "nothing registered by refused requests")

	status, body = ask(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"xgroup","trigger":"@Bob"}`)
	require.Equal(t, 200, status, body)
	g, ok, err := st.GroupByChat(ctx, -300)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "@Bob", g.Trigger)
	status, _ = ask(t, h, mainID, "list_chats", `{}`)
	assert.Equal(t, 200, status)
}

func TestUnknownOperation(t *testing.T) {
	h, _ := setup(t)
	status, body := ask(t, h, mainID, "format_disk", `{}`)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "unknown operation")
}

func FuzzHandle(f *testing.F) {
	f.Add("send_message", `{"text":"hi","chat_id":-200}`, false)
	f.Add("schedule_task", `{"prompt":"p","schedule_type":"cron","schedule_value":"0 9 * * *","group":"work"}`, false)
	f.Add("register_group", `{"chat_id":-300,"name":"X","folder":"x"}`, true)
	f.Add("pause_task", `{"task_id":1}`, false)
	h, st := setup(f)
	f.Fuzz(func(t *testing.T, op, body string, isMain bool) {
		ctx := context.Background()
		id := familyID
		if isMain {
			id = mainID
		}
		before, err := st.PendingOutbox(ctx)
		require.NoError(t, err)
		status, resp := h.Handle(ctx, id, op, []byte(body))
		_, err = json.Marshal(resp)
		require.NoError(t, err)
		require.Contains(t, []int{200, 400, 403, 404}, status)
		after, err := st.PendingOutbox(ctx)
		require.NoError(t, err)
		if isMain {
			return
		}
		// Whatever a non-main caller sends, nothing leaves its own chat.
		for _, o := range after[len(before):] {
			require.Equal(t, int64(-100), o.ChatID)
		}
		if status != 200 {
			require.Len(t, after, len(before), "a refused request changes nothing")
		}
	})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func scheduleBody(group string) string {
	return `{"prompt":"p","schedule_type":"interval","schedule_value":"1h","group":"` + group + `"}`
}

// Agents' task creations are capped per run and per group; each refusal is
// a 403 "denied: …" and stores nothing.
func TestTaskQuotas(t *testing.T) {
	run := func(inv string, id domain.Caller) domain.Caller { id.Run = inv; return id }
	cases := []struct {
		name    string
		before  int // live tasks of family made by the owner first
		calls   []domain.Caller
		bodies  []string
		allowed int
		deny    string
	}{
		{"one run is capped", 0, repeat(run("r1", familyID), MaxTasksPerRun+5), repeat(scheduleBody("family"), MaxTasksPerRun+5),
			MaxTasksPerRun, "most one run may create"},
		{"a new run has its own quota", 0, append(repeat(run("r1", familyID), MaxTasksPerRun), run("r2", familyID)),
			repeat(scheduleBody("family"), MaxTasksPerRun+1), MaxTasksPerRun + 1, ""},
		{"the group is capped across runs", MaxLiveTasks - 2, []domain.Caller{run("a", familyID), run("b", familyID), run("c", familyID)},
			repeat(scheduleBody("family"), 3), 2, "active or paused tasks"},
		{"main's tasks for a group count for that group", MaxLiveTasks - 1, []domain.Caller{run("m", mainID), run("m", mainID)},
			repeat(scheduleBody("family"), 2), 1, "active or paused tasks"},
		{"main's run quota covers every group", 0, repeat(run("m", mainID), MaxTasksPerRun+1),
			append(repeat(scheduleBody("family"), MaxTasksPerRun), scheduleBody("work")), MaxTasksPerRun, "most one run may create"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, st := setup(t)
			ctx := context.Background()
			for range tc.before {
				_, err := h.ScheduleTask(ctx, domain.Owner(), domain.Task{Group: "family", Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h"})
				require.NoError(t, err)
			}
			allowed := 0
			var lastDenied string
			for i, id := range tc.calls {
				status, body := ask(t, h, id, "schedule_task", tc.bodies[i])
				switch status {
				case 200:
					allowed++
				case 403:
					lastDenied = body
				default:
					t.Fatalf("call %d: %d %s", i, status, body)
				}
			}
			assert.Equal(t, tc.allowed, allowed)
			if tc.deny != "" {
				assert.Contains(t, lastDenied, `"denied: `)
				assert.Contains(t, lastDenied, tc.deny)
			}
			ts, err := st.ListTasks(ctx, "")
			require.NoError(t, err)
			assert.Len(t, ts, tc.before+tc.allowed, "refusals store nothing")
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Another group's task id and an id that does not exist get the same
// answer, byte for byte, for every task operation.
func TestOtherGroupsTaskLooksMissing(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	work, err := h.ScheduleTask(ctx, domain.Owner(), domain.Task{Group: "work", Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h"})
	require.NoError(t, err)
	missing := work.ID + 1000
	for _, op := range []string{"pause_task", "resume_task", "cancel_task", "update_task"} {
		t.Run(op, func(t *testing.T) {
			body := func(id int64) string {
				b := `{"task_id":` + itoa(id)
				if op == "update_task" {
					b += `,"prompt":"x"`
				}
				return b + "}"
			}
			// The same number in both answers: compare with the id swapped.
			s1, b1 := ask(t, h, familyID, op, body(work.ID))
			s2, b2 := ask(t, h, familyID, op, body(missing))
			assert.Equal(t, 403, s1, b1)
			assert.Equal(t, s1, s2)
			assert.Equal(t, b1, strings.ReplaceAll(b2, itoa(missing), itoa(work.ID)))
			assert.Contains(t, b1, "denied: ")
		})
	}
	got, _, _ := st.Task(ctx, work.ID)
	assert.Equal(t, domain.TaskActive, got.Status)
	assert.Equal(t, "p", got.Prompt)
}

// A flood of refused calls writes a bounded number of rows: the first ones
// one by one, the rest as one aggregate row per decision when the run ends.
// Every call still gets its refusal.
func TestRefusalFloodAuditIsBounded(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	id := familyID
	id.Run = "flood"
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			op, body := "send_message", `{"text":"x","chat_id":42}`
			if i%2 == 1 {
				op, body = "pause_task", `{"task_id":999}`
			}
			status, _ := h.Handle(ctx, id, op, []byte(body))
			assert.Equal(t, 403, status)
		})
	}
	wg.Wait()
	for range 5 { // malformed calls have the same budget
		status, _ := h.Handle(ctx, id, "send_message", []byte(`{"bogus":1}`))
		assert.Equal(t, 400, status)
	}
	rows, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, rows, MaxAuditedRefusals, "only the first refusals are written while the run lasts")

	h.EndRun("flood")
	rows, err = st.AuditLog(ctx, 0)
	require.NoError(t, err)
	require.Len(t, rows, MaxAuditedRefusals+2, "then one aggregate row per decision")
	var agg []string
	for _, r := range rows[:2] {
		assert.Equal(t, "ipc.aggregate", r.Operation)
		assert.Equal(t, "family", r.Group)
		agg = append(agg, r.Decision+": "+r.Reason)
	}
	all := strings.Join(agg, "\n")
	assert.Contains(t, all, "deny: 480 more calls")
	assert.Contains(t, all, "error: 5 more calls")
	assert.Contains(t, all, "send_message ×")
	assert.Contains(t, all, "pause_task ×")

	// A new run starts with a fresh budget; the ended one keeps no state.
	id.Run = "next"
	status, _ := h.Handle(ctx, id, "send_message", []byte(`{"text":"x","chat_id":42}`))
	assert.Equal(t, 403, status)
	rows, err = st.AuditLog(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "ipc.send_message", rows[0].Operation)
	h.EndRun("next")
	h.mu.Lock()
	assert.Empty(t, h.runs)
	h.mu.Unlock()
}

// A call still being answered when its run ends keeps the aggregate until
// it is done; one that arrives after the end is answered and not kept.
func TestRunEndWaitsForCallsInFlight(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	id := familyID
	id.Run = "late"
	for range MaxAuditedRefusals + 3 {
		h.Handle(ctx, id, "list_chats", nil)
	}
	inflight := h.begin(id) // a call the handler has started on
	h.EndRun("late")
	rows, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, rows, MaxAuditedRefusals, "not flushed while a call is in flight")
	h.finish(inflight)
	rows, err = st.AuditLog(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, rows, MaxAuditedRefusals+1)
	assert.Contains(t, rows[0].Reason, "list_chats ×3")

	status, _ := h.Handle(ctx, id, "list_chats", nil)
	assert.Equal(t, 403, status)
	h.mu.Lock()
	assert.Empty(t, h.runs, "a straggler of an ended run is not kept")
	h.mu.Unlock()
}

// The owner's chat commands and the CLI go through the same service: no
// quota, plain answers for ids nobody has, one audit row per change, and
// what a group may become is still checked.
func TestOwnerOperations(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	owner := domain.Owner()
	for range MaxTasksPerRun + 1 {
		_, err := h.ScheduleTask(ctx, owner, domain.Task{Group: "family", Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h"})
		require.NoError(t, err, "the owner has no quota per run")
	}
	_, err := h.ScheduleTask(ctx, owner, domain.Task{Group: "nope", Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h"})
	assert.ErrorContains(t, err, "no group has the folder nope")

	_, err = h.ChangeTaskStatus(ctx, owner, PauseTask, 999)
	assert.ErrorIs(t, err, ErrNoTask)
	assert.EqualError(t, err, "no task has the id 999")
	task, err := h.ChangeTaskStatus(ctx, owner, PauseTask, 1)
	require.NoError(t, err)
	assert.Equal(t, domain.TaskPaused, task.Status)

	_, err = h.RegisterGroup(ctx, owner, GroupRequest{ChatID: 42, Folder: "again"})
	assert.ErrorContains(t, err, "chat 42 is the main chat")
	_, err = h.RegisterGroup(ctx, owner, GroupRequest{ChatID: -300, Folder: "main"})
	assert.ErrorContains(t, err, "reserved")
	g, err := h.RegisterGroup(ctx, owner, GroupRequest{ChatID: -300, Folder: "friends", Name: "Friends"})
	require.NoError(t, err)
	assert.Equal(t, "Friends", g.Name)
	ok, err := h.UnregisterGroup(ctx, owner, "friends")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = h.UnregisterGroup(ctx, owner, "friends")
	require.NoError(t, err)
	assert.False(t, ok, "nothing left to unregister")

	rows, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	ops := map[string]int{}
	for _, r := range rows {
		assert.Equal(t, "main", r.Group)
		assert.Equal(t, "allow", r.Decision, "the owner's mistakes are not audited")
		assert.True(t, strings.HasSuffix(r.Reason, " by the owner"), r.Reason)
		ops[r.Operation]++
	}
	assert.Equal(t, map[string]int{"schedule_task": MaxTasksPerRun + 1, "pause_task": 1, "register_group": 1, "unregister_group": 1}, ops)
}

// No agent run may unregister a group, main's included: it is the owner's.
func TestAgentsCannotUnregister(t *testing.T) {
	h, st := setup(t)
	ok, err := h.UnregisterGroup(context.Background(), mainID, "family")
	assert.ErrorContains(t, err, "denied: ")
	assert.False(t, ok)
	_, registered, err := st.GroupByFolder(context.Background(), "family")
	require.NoError(t, err)
	assert.True(t, registered)
}

// The scheduler hears of every change of tasks, whoever made it; a refused
// request changes nothing and says nothing.
func TestTasksChangedTellsTheScheduler(t *testing.T) {
	h, _ := setup(t)
	changed := func() bool {
		select {
		case <-h.TasksChanged():
			return true
		default:
			return false
		}
	}
	status, _ := ask(t, h, familyID, "schedule_task", scheduleBody("work"))
	require.Equal(t, 403, status)
	assert.False(t, changed(), "a refusal changes nothing")
	status, _ = ask(t, h, familyID, "schedule_task", scheduleBody("family"))
	require.Equal(t, 200, status)
	assert.True(t, changed(), "an agent's new task")
	_, err := h.ChangeTaskStatus(context.Background(), domain.Owner(), CancelTask, 1)
	require.NoError(t, err)
	assert.True(t, changed(), "the owner's cancel")
}

// A profile is given only when the file defines it now; the default always.
// Every refusal changes nothing and, like the change, is audited.
func TestSetGroupProfile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "profiles.json")
	write := func(content string) { require.NoError(t, os.WriteFile(path, []byte(content), 0o600)) }
	write(`{"profiles":{"research":{"network":"allowlist","egress":["pypi.org"]},"small":{"memory_mb":128}}}`)

	cases := []struct {
		name    string
		file    string // "" keeps the file; "-" removes it
		caller  domain.Caller
		folder  string
		profile string
		want    string // the profile the group has after; "" when refused
		errSub  string
	}{
		{"owner gives a defined profile", "", domain.Owner(), "family", "research", "research", ""},
		{"owner gives another", "", domain.Owner(), "family", "small", "small", ""},
		{"undefined name refused", "", domain.Owner(), "family", "nope", "", `profile "nope" is not defined in ` + path},
		{"unknown folder", "", domain.Owner(), "nobody", "small", "", "no group has the folder nobody"},
		{"main's agent may not", "", mainID, "family", "research", "", "denied: only the owner"},
		{"a group's agent may not choose its own", "", familyID, "family", "research", "", "denied: only the owner"},
		{"malformed file refuses any name", `{"profiles":{"research":{"network":"open"}}}`, domain.Owner(), "family", "research", "", `field "network"`},
		{"malformed file still allows default", "", domain.Owner(), "family", "default", "default", ""},
		{"missing file refuses a name", "-", domain.Owner(), "family", "research", "", "no profiles file"},
		{"missing file allows default", "", domain.Owner(), "family", "default", "default", ""},
	}
	h, st := setup(t)
	h.cfg.Profiles = path
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			switch c.file {
			case "":
			case "-":
				require.NoError(t, os.Remove(path))
			default:
				write(c.file)
			}
			before, _, err := st.GroupByFolder(ctx, "family")
			require.NoError(t, err)
			g, err := h.SetGroupProfile(ctx, c.caller, c.folder, c.profile)
			after, _, err2 := st.GroupByFolder(ctx, "family")
			require.NoError(t, err2)
			if c.errSub != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.errSub)
				assert.Equal(t, before.Profile, after.Profile, "a refusal changes nothing")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, g.ProfileName())
			assert.Equal(t, c.want, after.ProfileName())
		})
	}
	log, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	var rows []string
	for _, e := range log {
		rows = append(rows, e.Operation+" "+e.Decision+" "+e.Reason)
	}
	all := strings.Join(rows, "\n")
	assert.Contains(t, all, "set_profile allow profile of family: default -> research by the owner")
	assert.Contains(t, all, `set_profile deny profile "nope" for family: profile "nope" is not defined`)
	assert.Contains(t, all, "ipc.set_profile deny only the owner may set")
}
