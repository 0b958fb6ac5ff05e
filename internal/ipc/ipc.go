// Package ipc answers the operations an agent may ask of the host over its
// socket (POST /ipc/<operation>). Every request is decoded strictly, checked
// by authz against the caller's socket identity, audit-logged when refused,
// and only then carried out.
package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawpen/clawpen/internal/authz"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/schedule"
	"github.com/clawpen/clawpen/internal/store"
)

// Limits on what an agent may put in a request.
const (
	MaxMessageText = 4 * markup.MaxMessageLen // split into several Telegram messages
	MaxPrompt      = 16 << 10
	MaxName        = 128
)

// Config wires the handler to the host.
type Config struct {
	Store         *store.Store
	GroupsDir     string
	Loc           *time.Location
	MinInterval   time.Duration
	WakeDelivery  func() // the outbox has new rows
	WakeScheduler func() // tasks changed
	// CheckMounts validates requested extra mounts against the allowlist;
	// nil refuses every mount.
	CheckMounts func(reqs []domain.MountRequest, isMain bool) error
	Logger      *slog.Logger
	Now         func() time.Time
}

// Handler implements hostsock.IPCFunc.
type Handler struct{ cfg Config }

// New returns a handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Loc == nil {
		cfg.Loc = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WakeDelivery == nil {
		cfg.WakeDelivery = func() {}
	}
	if cfg.WakeScheduler == nil {
		cfg.WakeScheduler = func() {}
	}
	return &Handler{cfg: cfg}
}

// errorBody is every non-2xx answer.
type errorBody struct {
	Error string `json:"error"`
}

// badRequest is a malformed body: 400 with what is wrong.
type badRequest struct{ msg string }

func (b badRequest) Error() string { return b.msg }

func bad(format string, a ...any) error { return badRequest{fmt.Sprintf(format, a...)} }

// denied is a refusal: 403 "denied: <reason>".
type denied struct{ reason string }

func (d denied) Error() string { return "denied: " + d.reason }

// Handle answers one request from the group bound to id's socket.
func (h *Handler) Handle(ctx context.Context, id hostsock.Identity, op string, body []byte) (int, any) {
	caller := authz.Caller{Group: id.Group, ChatID: id.ChatID, IsMain: id.IsMain}
	resp, err := h.dispatch(ctx, caller, op, body)
	var br badRequest
	var dn denied
	switch {
	case err == nil:
		return http.StatusOK, resp
	case errors.As(err, &dn):
		h.audit(ctx, caller, op, "deny", dn.reason)
		return http.StatusForbidden, errorBody{Error: dn.Error()}
	case errors.As(err, &br):
		h.audit(ctx, caller, op, "error", "malformed request: "+br.msg)
		return http.StatusBadRequest, errorBody{Error: br.msg}
	case errors.Is(err, errUnknownOp):
		h.audit(ctx, caller, op, "error", "unknown operation")
		return http.StatusNotFound, errorBody{Error: fmt.Sprintf("unknown operation %q", op)}
	default:
		h.cfg.Logger.Error("ipc operation failed", "group", caller.Group, "op", op, "err", err)
		return http.StatusInternalServerError, errorBody{Error: "the host could not complete " + op + "; see its log"}
	}
}

var errUnknownOp = errors.New("unknown operation")

func (h *Handler) dispatch(ctx context.Context, c authz.Caller, op string, body []byte) (any, error) {
	switch op {
	case authz.SendMessage:
		return h.sendMessage(ctx, c, body)
	case authz.ScheduleTask:
		return h.scheduleTask(ctx, c, body)
	case authz.UpdateTask:
		return h.updateTask(ctx, c, body)
	case authz.ListTasks:
		if err := decode(body, &struct{}{}); err != nil {
			return nil, err
		}
		return h.listTasks(ctx, c)
	case authz.PauseTask, authz.ResumeTask, authz.CancelTask:
		return h.taskStatus(ctx, c, op, body)
	case authz.RegisterGroup:
		return h.registerGroup(ctx, c, body)
	case authz.ListChats:
		if err := decode(body, &struct{}{}); err != nil {
			return nil, err
		}
		return h.listChats(ctx, c)
	default:
		return nil, errUnknownOp
	}
}

// decode reads exactly one JSON object into dst: unknown fields, wrong types
// and trailing data are errors. An empty body is an empty object.
func decode(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if !utf8.Valid(body) {
		return bad("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return bad("field %q must be %s, not %s", te.Field, te.Type.String(), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return bad("%s", strings.TrimPrefix(err.Error(), "json: "))
		default:
			return bad("body is not a JSON object: %v", err)
		}
	}
	if dec.More() {
		return bad("body has data after the JSON object")
	}
	return nil
}

func (h *Handler) audit(ctx context.Context, c authz.Caller, op, decision, reason string) {
	err := h.cfg.Store.Audit(ctx, domain.AuditEntry{Time: h.cfg.Now(), Group: c.Group, Operation: "ipc." + op, Decision: decision, Reason: reason})
	if err != nil {
		h.cfg.Logger.Error("write audit log", "err", err)
	}
}

func (h *Handler) authorize(ctx context.Context, c authz.Caller, op string, t authz.Target) error {
	d := authz.Authorize(c, op, t)
	if !d.Allow {
		return denied{d.Reason}
	}
	return nil
}

type sendMessageReq struct {
	Text   string `json:"text"`
	ChatID *int64 `json:"chat_id"`
}

func (h *Handler) sendMessage(ctx context.Context, c authz.Caller, body []byte) (any, error) {
	var req sendMessageReq
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Text) == "" {
		return nil, bad("text is required")
	}
	if utf8.RuneCountInString(req.Text) > MaxMessageText {
		return nil, bad("text is longer than %d characters", MaxMessageText)
	}
	target := c.ChatID
	if req.ChatID != nil {
		target = *req.ChatID
	}
	_, registered, err := h.cfg.Store.GroupByChat(ctx, target)
	if err != nil {
		return nil, err
	}
	if err := h.authorize(ctx, c, authz.SendMessage, authz.Target{ChatID: target, ChatRegistered: registered}); err != nil {
		return nil, err
	}
	var out []domain.Outgoing
	for _, chunk := range markup.Split(req.Text, markup.MaxMessageLen) {
		out = append(out, domain.Outgoing{ChatID: target, Text: chunk, Created: h.cfg.Now()})
	}
	if _, err := h.cfg.Store.Enqueue(ctx, out); err != nil {
		return nil, err
	}
	h.cfg.WakeDelivery()
	return map[string]any{"ok": true, "chat_id": target}, nil
}

type scheduleReq struct {
	Prompt        string  `json:"prompt"`
	ScheduleType  string  `json:"schedule_type"`
	ScheduleValue string  `json:"schedule_value"`
	Group         *string `json:"group"`
	ContextMode   *string `json:"context_mode"`
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

// View turns a task into its agent-facing form.
func View(t domain.Task, loc *time.Location) TaskView {
	v := TaskView{ID: t.ID, Group: t.Group, Prompt: t.Prompt, ScheduleType: t.ScheduleType,
		ScheduleValue: t.ScheduleValue, ContextMode: t.ContextMode, Status: t.Status}
	if !t.NextRun.IsZero() {
		s := t.NextRun.In(loc).Format(time.RFC3339)
		v.NextRun = &s
	}
	return v
}

func (h *Handler) scheduleTask(ctx context.Context, c authz.Caller, body []byte) (any, error) {
	var req scheduleReq
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	group := c.Group
	if req.Group != nil {
		group = *req.Group
	}
	g, registered, err := h.cfg.Store.GroupByFolder(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := h.authorize(ctx, c, authz.ScheduleTask, authz.Target{Group: group, GroupRegistered: registered}); err != nil {
		return nil, err
	}
	t := domain.Task{Group: group, ChatID: g.ChatID, Prompt: req.Prompt, ScheduleType: req.ScheduleType, ScheduleValue: req.ScheduleValue, ContextMode: domain.ContextGroup}
	if req.ContextMode != nil {
		t.ContextMode = *req.ContextMode
	}
	t, err = CreateTask(ctx, h.cfg.Store, t, h.cfg.Loc, h.cfg.MinInterval, h.cfg.Now())
	if err != nil {
		return nil, err
	}
	h.audit(ctx, c, authz.ScheduleTask, "allow", fmt.Sprintf("task %d for %s: %s %s", t.ID, group, t.ScheduleType, t.ScheduleValue))
	h.cfg.WakeScheduler()
	return View(t, h.cfg.Loc), nil
}

// CreateTask validates t and stores it with its first run (shared by IPC,
// the /schedule command and the CLI).
func CreateTask(ctx context.Context, st *store.Store, t domain.Task, loc *time.Location, minInterval time.Duration, now time.Time) (domain.Task, error) {
	if t.ContextMode == "" {
		t.ContextMode = domain.ContextGroup
	}
	if err := prepareTask(&t, loc, minInterval, now); err != nil {
		return domain.Task{}, err
	}
	return st.CreateTask(ctx, t)
}

// prepareTask checks prompt, schedule and context mode, and sets NextRun.
func prepareTask(t *domain.Task, loc *time.Location, minInterval time.Duration, now time.Time) error {
	if strings.TrimSpace(t.Prompt) == "" {
		return bad("prompt is required")
	}
	if len(t.Prompt) > MaxPrompt {
		return bad("prompt is longer than %d bytes", MaxPrompt)
	}
	if t.ContextMode != domain.ContextGroup && t.ContextMode != domain.ContextIsolated {
		return bad("context_mode must be group or isolated, not %q", t.ContextMode)
	}
	spec, err := schedule.Parse(t.ScheduleType, t.ScheduleValue, loc, minInterval)
	if err != nil {
		return bad("%v", err)
	}
	first, err := spec.First(now)
	if err != nil {
		return bad("%v", err)
	}
	t.NextRun = first
	return nil
}

type updateReq struct {
	TaskID        int64   `json:"task_id"`
	Prompt        *string `json:"prompt"`
	ScheduleType  *string `json:"schedule_type"`
	ScheduleValue *string `json:"schedule_value"`
	ContextMode   *string `json:"context_mode"`
}

// ownedTask loads a task and checks the caller may act on it. A task that
// does not exist and one of another group look the same to a non-main caller
// only in their reason, never in effect: both change nothing.
func (h *Handler) ownedTask(ctx context.Context, c authz.Caller, op string, id int64) (domain.Task, error) {
	if id <= 0 {
		return domain.Task{}, bad("task_id is required")
	}
	t, ok, err := h.cfg.Store.Task(ctx, id)
	if err != nil {
		return domain.Task{}, err
	}
	if !ok {
		return domain.Task{}, bad("no task has the id %d", id)
	}
	if err := h.authorize(ctx, c, op, authz.Target{Group: t.Group}); err != nil {
		return domain.Task{}, err
	}
	return t, nil
}

func (h *Handler) updateTask(ctx context.Context, c authz.Caller, body []byte) (any, error) {
	var req updateReq
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	t, err := h.ownedTask(ctx, c, authz.UpdateTask, req.TaskID)
	if err != nil {
		return nil, err
	}
	if t.Status == domain.TaskCompleted || t.Status == domain.TaskCancelled {
		return nil, bad("task %d is %s and cannot be changed", t.ID, t.Status)
	}
	if req.Prompt != nil {
		t.Prompt = *req.Prompt
	}
	if req.ScheduleType != nil {
		t.ScheduleType = *req.ScheduleType
	}
	if req.ScheduleValue != nil {
		t.ScheduleValue = *req.ScheduleValue
	}
	if req.ContextMode != nil {
		t.ContextMode = *req.ContextMode
	}
	if err := prepareTask(&t, h.cfg.Loc, h.cfg.MinInterval, h.cfg.Now()); err != nil {
		return nil, err
	}
	if err := h.cfg.Store.UpdateTask(ctx, t); err != nil {
		return nil, err
	}
	h.audit(ctx, c, authz.UpdateTask, "allow", fmt.Sprintf("task %d of %s", t.ID, t.Group))
	h.cfg.WakeScheduler()
	return View(t, h.cfg.Loc), nil
}

func (h *Handler) listTasks(ctx context.Context, c authz.Caller) (any, error) {
	ts, err := h.cfg.Store.ListTasks(ctx, authz.TaskScope(c))
	if err != nil {
		return nil, err
	}
	out := make([]TaskView, 0, len(ts))
	for _, t := range ts {
		out = append(out, View(t, h.cfg.Loc))
	}
	return out, nil
}

func (h *Handler) taskStatus(ctx context.Context, c authz.Caller, op string, body []byte) (any, error) {
	var req struct {
		TaskID int64 `json:"task_id"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	t, err := h.ownedTask(ctx, c, op, req.TaskID)
	if err != nil {
		return nil, err
	}
	if err := ChangeStatus(ctx, h.cfg.Store, &t, op, h.cfg.Loc, h.cfg.MinInterval, h.cfg.Now()); err != nil {
		return nil, err
	}
	h.audit(ctx, c, op, "allow", fmt.Sprintf("task %d of %s", t.ID, t.Group))
	h.cfg.WakeScheduler()
	return View(t, h.cfg.Loc), nil
}

// ChangeStatus pauses, resumes or cancels t (shared by IPC, admin commands
// and the CLI). Resuming computes the next run from now.
func ChangeStatus(ctx context.Context, st *store.Store, t *domain.Task, op string, loc *time.Location, minInterval time.Duration, now time.Time) error {
	switch op {
	case authz.PauseTask:
		if t.Status != domain.TaskActive {
			return bad("task %d is %s, not active", t.ID, t.Status)
		}
		t.Status = domain.TaskPaused
	case authz.ResumeTask:
		if t.Status != domain.TaskPaused {
			return bad("task %d is %s, not paused", t.ID, t.Status)
		}
		spec, err := schedule.Parse(t.ScheduleType, t.ScheduleValue, loc, minInterval)
		if err != nil {
			return bad("task %d cannot resume: %v", t.ID, err)
		}
		next := t.NextRun
		if next.IsZero() || next.Before(now) {
			if t.ScheduleType == domain.ScheduleOnce {
				next = now // a missed one-off runs once, now
			} else if next, err = spec.First(now); err != nil {
				return bad("task %d cannot resume: %v", t.ID, err)
			}
		}
		if err := st.SetTaskNextRun(ctx, t.ID, next, time.Time{}); err != nil {
			return err
		}
		t.NextRun = next
		t.Status = domain.TaskActive
	case authz.CancelTask:
		if t.Status == domain.TaskCancelled || t.Status == domain.TaskCompleted {
			return bad("task %d is already %s", t.ID, t.Status)
		}
		t.Status = domain.TaskCancelled
	default:
		return fmt.Errorf("change status: unknown operation %q", op)
	}
	return st.SetTaskStatus(ctx, t.ID, t.Status)
}

type registerReq struct {
	ChatID  int64      `json:"chat_id"`
	Name    string     `json:"name"`
	Folder  string     `json:"folder"`
	Trigger *string    `json:"trigger"`
	Mounts  []mountReq `json:"mounts"`
}

// mountReq is a requested extra mount; readonly defaults to true.
type mountReq struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      *bool  `json:"readonly"`
}

func (h *Handler) registerGroup(ctx context.Context, c authz.Caller, body []byte) (any, error) {
	var req registerReq
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	main, _, err := h.cfg.Store.GroupByFolder(ctx, domain.MainFolder)
	if err != nil {
		return nil, err
	}
	target := authz.Target{MakesMain: req.Folder == domain.MainFolder, RegistersChatOfMain: req.ChatID != 0 && req.ChatID == main.ChatID}
	if err := h.authorize(ctx, c, authz.RegisterGroup, target); err != nil {
		return nil, err
	}
	var reqs []domain.MountRequest
	for _, m := range req.Mounts {
		reqs = append(reqs, domain.MountRequest{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly == nil || *m.ReadOnly})
	}
	if len(reqs) > 0 {
		if h.cfg.CheckMounts == nil {
			return nil, denied{"extra mounts are not available"}
		}
		// The group is not main, whatever its folder claims.
		if err := h.cfg.CheckMounts(reqs, false); err != nil {
			return nil, denied{err.Error()}
		}
	}
	g, err := RegisterGroup(ctx, h.cfg.Store, h.cfg.GroupsDir, req.ChatID, req.Folder, req.Name, deref(req.Trigger))
	if err != nil {
		return nil, err
	}
	if len(reqs) > 0 {
		g.Mounts = reqs
		if err := h.cfg.Store.PutGroup(ctx, g); err != nil {
			return nil, err
		}
	}
	h.audit(ctx, c, authz.RegisterGroup, "allow", fmt.Sprintf("chat %d as folder %s", g.ChatID, g.Folder))
	return g, nil
}

// RegisterGroup validates and registers a non-main group and creates its
// folder (shared by IPC, the /register command and the CLI).
func RegisterGroup(ctx context.Context, st *store.Store, groupsDir string, chatID int64, folder, name, trigger string) (domain.Group, error) {
	if chatID == 0 {
		return domain.Group{}, bad("chat_id is required: the numeric Telegram chat id")
	}
	if err := domain.ValidateFolder(folder); err != nil {
		return domain.Group{}, bad("%v", err)
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = folder
	}
	if utf8.RuneCountInString(name) > MaxName {
		return domain.Group{}, bad("name is longer than %d characters", MaxName)
	}
	if trigger != "" && (!strings.HasPrefix(trigger, "@") || strings.ContainsAny(trigger, " \t\n") || len(trigger) > 64) {
		return domain.Group{}, bad("trigger must look like @Word, not %q", trigger)
	}
	if main, ok, err := st.GroupByFolder(ctx, domain.MainFolder); err != nil {
		return domain.Group{}, err
	} else if ok && main.ChatID == chatID {
		return domain.Group{}, bad("chat %d is the main chat", chatID)
	}
	if g, ok, err := st.GroupByChat(ctx, chatID); err != nil {
		return domain.Group{}, err
	} else if ok && g.Folder != folder {
		return domain.Group{}, bad("chat %d is already registered as folder %s", chatID, g.Folder)
	}
	if g, ok, err := st.GroupByFolder(ctx, folder); err != nil {
		return domain.Group{}, err
	} else if ok && g.ChatID != chatID {
		return domain.Group{}, bad("folder %s already belongs to chat %d", folder, g.ChatID)
	}
	if err := os.MkdirAll(filepath.Join(groupsDir, folder), 0o755); err != nil {
		return domain.Group{}, fmt.Errorf("create folder of %q: %w", folder, err)
	}
	g := domain.Group{ChatID: chatID, Name: name, Folder: folder, Trigger: trigger, Added: time.Now()}
	if err := st.PutGroup(ctx, g); err != nil {
		return domain.Group{}, err
	}
	return g, nil
}

func (h *Handler) listChats(ctx context.Context, c authz.Caller) (any, error) {
	if err := h.authorize(ctx, c, authz.ListChats, authz.Target{}); err != nil {
		return nil, err
	}
	chats, err := h.cfg.Store.ListChats(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := h.cfg.Store.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	folders := map[int64]string{}
	for _, g := range groups {
		folders[g.ChatID] = g.Folder
	}
	type chatView struct {
		ChatID   int64  `json:"chat_id"`
		Title    string `json:"title"`
		Type     string `json:"type"`
		Folder   string `json:"folder,omitempty"`
		LastSeen string `json:"last_seen"`
	}
	out := make([]chatView, 0, len(chats))
	for _, ch := range chats {
		out = append(out, chatView{ChatID: ch.ID, Title: ch.Title, Type: ch.Type, Folder: folders[ch.ID], LastSeen: ch.LastSeen.In(h.cfg.Loc).Format(time.RFC3339)})
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// IsBadRequest reports whether err is the caller's mistake (for CLI and commands).
func IsBadRequest(err error) bool {
	var br badRequest
	return errors.As(err, &br)
}
