package ipc

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/store"
)

var (
	mainID   = hostsock.Identity{Group: "main", ChatID: 42, IsMain: true}
	familyID = hostsock.Identity{Group: "family", ChatID: -100}
)

func setup(t testing.TB) (*Handler, *store.Store) {
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

func call(t *testing.T, h *Handler, id hostsock.Identity, op, body string) (int, string) {
	t.Helper()
	status, resp := h.Handle(context.Background(), id, op, []byte(body))
	b, err := json.Marshal(resp)
	require.NoError(t, err)
	return status, string(b)
}

func TestSendMessage(t *testing.T) {
	cases := []struct {
		name   string
		id     hostsock.Identity
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
		{"trailing data", familyID, `{"text":"a"}{"text":"b"}`, 400, 0, "after the JSON object"},
		{"not JSON", familyID, `hello`, 400, 0, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, st := setup(t)
			status, body := call(t, h, c.id, "send_message", c.body)
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

	status, body := call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h"}`)
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"group":"family"`)
	assert.Contains(t, body, `"next_run":"2026-11-22T13:00:00Z"`)

	status, body = call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h","group":"work"}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, "denied: ")
	status, _ = call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1h","group":"main"}`)
	assert.Equal(t, 403, status)
	status, body = call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"interval","schedule_value":"1s"}`)
	assert.Equal(t, 400, status, body)
	status, _ = call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"weekly","schedule_value":"x"}`)
	assert.Equal(t, 400, status)
	status, _ = call(t, h, familyID, "schedule_task", `{"prompt":"p","schedule_type":"once","schedule_value":"2026-11-23T09:00:00Z","context_mode":"shared"}`)
	assert.Equal(t, 400, status)

	status, body = call(t, h, mainID, "schedule_task", `{"prompt":"for work","schedule_type":"cron","schedule_value":"0 9 * * *","group":"work","context_mode":"isolated"}`)
	require.Equal(t, 200, status, body)

	ts, err := st.ListTasks(ctx, "")
	require.NoError(t, err)
	require.Len(t, ts, 2, "only the allowed schedules were stored")
	familyTask, workTask := ts[0], ts[1]

	// list_tasks: main sees all, a group its own.
	_, body = call(t, h, familyID, "list_tasks", `{}`)
	var views []TaskView
	require.NoError(t, json.Unmarshal([]byte(body), &views))
	require.Len(t, views, 1)
	assert.Equal(t, "family", views[0].Group)
	_, body = call(t, h, mainID, "list_tasks", ``)
	require.NoError(t, json.Unmarshal([]byte(body), &views))
	assert.Len(t, views, 2)

	// A group may not touch another group's task.
	for _, op := range []string{"pause_task", "resume_task", "cancel_task"} {
		status, body = call(t, h, familyID, op, `{"task_id":`+itoa(workTask.ID)+`}`)
		assert.Equal(t, 403, status, op)
		assert.Contains(t, body, "denied: ")
	}
	status, _ = call(t, h, familyID, "update_task", `{"task_id":`+itoa(workTask.ID)+`,"prompt":"hijacked"}`)
	assert.Equal(t, 403, status)
	got, _, _ := st.Task(ctx, workTask.ID)
	assert.Equal(t, "for work", got.Prompt)
	assert.Equal(t, domain.TaskActive, got.Status)

	// Its own: pause, resume, update, cancel.
	status, body = call(t, h, familyID, "pause_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	status, body = call(t, h, familyID, "resume_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	status, body = call(t, h, familyID, "update_task", `{"task_id":`+itoa(familyTask.ID)+`,"schedule_value":"2h"}`)
	require.Equal(t, 200, status, body)
	status, body = call(t, h, familyID, "cancel_task", `{"task_id":`+itoa(familyTask.ID)+`}`)
	require.Equal(t, 200, status, body)
	got, _, _ = st.Task(ctx, familyTask.ID)
	assert.Equal(t, domain.TaskCancelled, got.Status)
	assert.Equal(t, "2h", got.ScheduleValue)

	// Main may manage any group's task.
	status, body = call(t, h, mainID, "pause_task", `{"task_id":`+itoa(workTask.ID)+`}`)
	assert.Equal(t, 200, status, body)
}

func TestRegisterAndListChats(t *testing.T) {
	h, st := setup(t)
	ctx := context.Background()
	status, body := call(t, h, familyID, "register_group", `{"chat_id":-300,"name":"X","folder":"x"}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, "denied: ")
	status, _ = call(t, h, familyID, "list_chats", `{}`)
	assert.Equal(t, 403, status)
	status, body = call(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"main"}`)
	assert.Equal(t, 403, status, "no agent can make a group main")
	assert.Contains(t, body, "denied: ")
	status, _ = call(t, h, mainID, "register_group", `{"chat_id":42,"name":"X","folder":"x"}`)
	assert.Equal(t, 403, status, "nor register the owner's chat")
	status, body = call(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"../x"}`)
	assert.Equal(t, 400, status, body)
	_, ok, err := st.GroupByChat(ctx, -300)
	require.NoError(t, err)
	assert.False(t, ok, "nothing registered by refused requests")

	status, body = call(t, h, mainID, "register_group", `{"chat_id":-300,"name":"X","folder":"xgroup","trigger":"@Bob"}`)
	require.Equal(t, 200, status, body)
	g, ok, err := st.GroupByChat(ctx, -300)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "@Bob", g.Trigger)
	status, _ = call(t, h, mainID, "list_chats", `{}`)
	assert.Equal(t, 200, status)
}

func TestUnknownOperation(t *testing.T) {
	h, _ := setup(t)
	status, body := call(t, h, mainID, "format_disk", `{}`)
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
