package ops

// The socket's edge: an agent's request (POST /ipc/<op>, a JSON body, from
// the caller its socket was made for) decoded strictly into an operation,
// and its outcome as an HTTP status and a JSON value. A refusal is 403
// {"error":"denied: <reason>"}, a malformed request 400 {"error":"<what is
// wrong>"} (DESIGN.md, "Host socket").

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/clawpen/clawpen/internal/domain"
)

// errorBody is every non-2xx answer.
type errorBody struct {
	Error string `json:"error"`
}

var errUnknownOp = errors.New("unknown operation")

// Handle answers one request of c, the caller its socket was made for.
func (s *Service) Handle(ctx context.Context, c domain.Caller, op string, body []byte) (int, any) {
	resp, err := s.dispatch(ctx, c, Op(op), body)
	var in invalid
	var dn denied
	switch {
	case err == nil:
		return http.StatusOK, resp
	case errors.As(err, &dn):
		return http.StatusForbidden, errorBody{Error: dn.Error()}
	case errors.As(err, &in):
		return http.StatusBadRequest, errorBody{Error: in.msg}
	case errors.Is(err, errUnknownOp):
		return http.StatusNotFound, errorBody{Error: fmt.Sprintf("unknown operation %q", op)}
	default:
		s.cfg.Logger.Error("ipc operation failed", "group", c.Group, "op", op, "err", err)
		return http.StatusInternalServerError, errorBody{Error: "the host could not complete " + op + "; see its log"}
	}
}

// dispatch decodes the body of op and carries it out. What cannot be read
// is written to the audit log as the service writes its refusals.
func (s *Service) dispatch(ctx context.Context, c domain.Caller, op Op, body []byte) (any, error) {
	req, err := decodeRequest(op, body)
	if err != nil {
		s.Rejected(ctx, c, op, err)
		return nil, err
	}
	switch r := req.(type) {
	case *sendMessageReq:
		chat, err := s.SendMessage(ctx, c, r.Text, r.ChatID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"ok": true, "chat_id": chat}, nil
	case *sendFileReq:
		return s.SendFile(ctx, c, r.Path, r.Caption, r.ChatID)
	case *scheduleReq:
		t := domain.Task{Group: c.Group, Prompt: r.Prompt, ScheduleType: r.ScheduleType, ScheduleValue: r.ScheduleValue, ContextMode: domain.ContextGroup}
		if r.Group != nil {
			t.Group = *r.Group
		}
		if r.ContextMode != nil {
			t.ContextMode = *r.ContextMode
		}
		return s.view(s.ScheduleTask(ctx, c, t))
	case *updateReq:
		ch := TaskChange{Prompt: r.Prompt, ScheduleType: r.ScheduleType, ScheduleValue: r.ScheduleValue, ContextMode: r.ContextMode}
		return s.view(s.UpdateTask(ctx, c, r.TaskID, ch))
	case *taskIDReq:
		return s.view(s.ChangeTaskStatus(ctx, c, op, r.TaskID))
	case *listTasksReq:
		ts, err := s.ListTasks(ctx, c, "")
		if err != nil {
			return nil, err
		}
		out := make([]TaskView, 0, len(ts))
		for _, t := range ts {
			out = append(out, viewOf(t, s.cfg.Loc))
		}
		return out, nil
	case *registerReq:
		gr := GroupRequest{ChatID: r.ChatID, Folder: r.Folder, Name: r.Name}
		if r.Trigger != nil {
			gr.Trigger = *r.Trigger
		}
		for _, m := range r.Mounts {
			gr.Mounts = append(gr.Mounts, domain.MountRequest{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly == nil || *m.ReadOnly})
		}
		return s.RegisterGroup(ctx, c, gr)
	case *hostToolReq:
		return s.HostTool(ctx, c, r.Name, r.Args)
	case *listChatsReq:
		chats, err := s.ListChats(ctx, c)
		if err != nil {
			return nil, err
		}
		out := make([]chatView, 0, len(chats))
		for _, ch := range chats {
			out = append(out, chatView{ChatID: ch.ID, Title: ch.Title, Type: ch.Type, Folder: ch.Folder, LastSeen: ch.LastSeen.In(s.cfg.Loc).Format(time.RFC3339)})
		}
		return out, nil
	}
	return nil, errUnknownOp
}

// The requests' bodies, one type per operation.
type (
	sendMessageReq struct {
		Text   string `json:"text"`
		ChatID *int64 `json:"chat_id"`
	}
	sendFileReq struct {
		Path    string `json:"path"`
		Caption string `json:"caption"`
		ChatID  *int64 `json:"chat_id"`
	}
	scheduleReq struct {
		Prompt        string  `json:"prompt"`
		ScheduleType  string  `json:"schedule_type"`
		ScheduleValue string  `json:"schedule_value"`
		Group         *string `json:"group"`
		ContextMode   *string `json:"context_mode"`
	}
	updateReq struct {
		TaskID        int64   `json:"task_id"`
		Prompt        *string `json:"prompt"`
		ScheduleType  *string `json:"schedule_type"`
		ScheduleValue *string `json:"schedule_value"`
		ContextMode   *string `json:"context_mode"`
	}
	taskIDReq struct {
		TaskID int64 `json:"task_id"`
	}
	listTasksReq struct{}
	listChatsReq struct{}
	registerReq  struct {
		ChatID  int64      `json:"chat_id"`
		Name    string     `json:"name"`
		Folder  string     `json:"folder"`
		Trigger *string    `json:"trigger"`
		Mounts  []mountReq `json:"mounts"`
	}
	// mountReq is a requested extra mount; readonly defaults to true.
	mountReq struct {
		HostPath      string `json:"hostPath"`
		ContainerPath string `json:"containerPath"`
		ReadOnly      *bool  `json:"readonly"`
	}
)

// decodeRequest reads the body of op into its request type.
func decodeRequest(op Op, body []byte) (any, error) {
	var req any
	switch op {
	case SendMessage:
		req = &sendMessageReq{}
	case SendFile:
		req = &sendFileReq{}
	case ScheduleTask:
		req = &scheduleReq{}
	case UpdateTask:
		req = &updateReq{}
	case PauseTask, ResumeTask, CancelTask:
		req = &taskIDReq{}
	case ListTasks:
		req = &listTasksReq{}
	case RegisterGroup:
		req = &registerReq{}
	case ListChats:
		req = &listChatsReq{}
	case HostTool:
		req = &hostToolReq{}
	default:
		return nil, errUnknownOp
	}
	return req, decode(body, req)
}

// decode reads exactly one JSON object into dst: unknown or duplicate names,
// names in another case, wrong types, invalid UTF-8 and trailing data are
// errors. An empty body is an empty object.
func decode(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, dst, json.RejectUnknownMembers(true)); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer.LastToken() != "" {
			switch {
			case errors.Is(se.Err, json.ErrUnknownName):
				return bad("unknown field %q", se.JSONPointer.LastToken())
			case se.GoType != nil:
				return bad("field %q must be %s, not %s", se.JSONPointer.LastToken(), se.GoType, se.JSONKind)
			}
		}
		return bad("body is not a JSON object: %v", err)
	}
	return nil
}

// TaskView is how tasks are shown to agents (DESIGN.md: list_tasks).
type TaskView struct {
	ID            int64   `json:"id"`
	Group         string  `json:"group"`
	Prompt        string  `json:"prompt"`
	ScheduleType  string  `json:"schedule_type"`
	ScheduleValue string  `json:"schedule_value"`
	ContextMode   string  `json:"context_mode"`
	Status        string  `json:"status"`
	NextRun       *string `json:"next_run"`
}

// viewOf turns a task into its agent-facing form.
func viewOf(t domain.Task, loc *time.Location) TaskView {
	v := TaskView{ID: t.ID, Group: t.Group, Prompt: t.Prompt, ScheduleType: t.ScheduleType,
		ScheduleValue: t.ScheduleValue, ContextMode: t.ContextMode, Status: t.Status}
	if !t.NextRun.IsZero() {
		s := t.NextRun.In(loc).Format(time.RFC3339)
		v.NextRun = &s
	}
	return v
}

// view is an operation's task as the agent sees it.
func (s *Service) view(t domain.Task, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return viewOf(t, s.cfg.Loc), nil
}

// chatView is how chats are shown to agents (list_chats).
type chatView struct {
	ChatID   int64  `json:"chat_id"`
	Title    string `json:"title"`
	Type     string `json:"type"`
	Folder   string `json:"folder,omitempty"`
	LastSeen string `json:"last_seen"`
}
