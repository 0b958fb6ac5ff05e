// Package ops carries out the operations on tasks, groups and chats that an
// agent asks for over its socket (ipc.go decodes them), the owner sends as
// chat commands, and the CLI runs: each is checked against the caller
// (authz.go, a pure table), held to the quotas of an agent run, written to
// the audit log, and only then done.
package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/clawpen/clawpen/internal/approval"
	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/scheduler"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/tools"
)

// Limits on what a request may carry.
const (
	MaxMessageText = 4 * markup.MaxMessageLen // split into several Telegram messages
	MaxPrompt      = 16 << 10
	MaxName        = 128
)

// Quotas on what agents may create. The owner is not held to them.
const (
	// MaxLiveTasks caps a group's active and paused tasks (a paused task
	// can be resumed, so it counts).
	MaxLiveTasks = 50
	// MaxTasksPerRun caps the tasks one agent run may create, for any group.
	MaxTasksPerRun = 10
)

// Bounds on the audit rows one run's calls write: beyond them, calls are
// counted by operation and written as one row per decision when the run
// ends, so a flood of refused calls cannot flood the audit log. The agent
// still gets its answer to every call.
const (
	MaxAuditedRefusals = 20  // refused or malformed calls written one by one
	MaxAuditedAllowed  = 100 // allowed calls written one by one
)

// Config is what the service works on.
type Config struct {
	Store     *store.Store
	GroupsDir string // resolved (config): a group's folder is made below it
	// SandboxUser is whose rights send_file opens a sandbox's path with
	// (zero: the host's own, as on a host that is not root).
	SandboxUser beneath.User
	Loc         *time.Location // the time zone of schedules and shown times
	MinInterval time.Duration  // the shortest interval a task may repeat at
	// Mounts checks the extra mounts a registration asks for; nil refuses
	// every one.
	Mounts *mounts.Policy
	// Profiles is the admin's sandbox profiles file (CLAWPEN_PROFILES),
	// read at each check; "": none, only the built-in default exists.
	Profiles string
	// Tools is the owner's bridge tool definitions (nil: none), and
	// ToolEnv where their processes' listed variables are read.
	Tools   *tools.Dir
	ToolEnv tools.Getenv
	// Approvals asks the owner about calls that wait for the owner's
	// press (tools marked for approval, egress under egress_ask); nil
	// refuses them all.
	Approvals *approval.Broker
	// Guard finds the host's secrets in what an agent sends to a chat and
	// in bridge tool output before the agent gets it; nil: none looked for.
	Guard  *leakguard.Guard
	Logger *slog.Logger
	Now    func() time.Time
	// Refused, when set, hears of every agent request refused (denied or
	// unreadable), also those the audit budget counts rather than writes:
	// the host's metrics.
	Refused func(op Op)
}

// Service is safe for concurrent use.
type Service struct {
	cfg     Config
	changed chan struct{} // tasks changed (see TasksChanged)
	copies  chan struct{} // send_file copies in flight (sendfile.go)

	mu     sync.Mutex
	runs   map[string]*runState // by run (invocation id), while the run's calls last
	recent [64]string           // runs that ended most recently
	next   int                  // slot of recent to overwrite
}

// runState is what the service keeps about one agent run.
type runState struct {
	id, group string
	inflight  int                   // calls being answered
	ended     bool                  // EndRun was called
	created   int                   // tasks this run created
	toolCalls int                   // bridge tool calls running
	written   map[string]int        // audit rows written, by budget ("refused", "allowed")
	counted   map[string]map[Op]int // audit rows not written: decision -> operation -> calls
	owner     bool                  // the owner's call: no budget, no quota, not kept
}

// New returns a service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Loc == nil {
		cfg.Loc = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, changed: make(chan struct{}, 1), copies: make(chan struct{}, maxFileCopies), runs: map[string]*runState{}}
}

// TasksChanged receives a value after a task was created, changed, paused,
// resumed or cancelled (several changes may make one): the scheduler
// listens, and re-reads when the next task is due.
func (s *Service) TasksChanged() <-chan struct{} { return s.changed }

func (s *Service) tasksChanged() {
	select {
	case s.changed <- struct{}{}:
	default: // one pending wake is enough
	}
}

// invalid is a malformed request: 400 at the socket, with what is wrong.
type invalid struct{ msg string }

func (e invalid) Error() string { return e.msg }

func bad(format string, a ...any) error { return invalid{fmt.Sprintf(format, a...)} }

// denied is a refusal: 403 "denied: <reason>" at the socket. detail, when
// set, is what the audit log records instead of reason (facts the caller
// must not learn).
type denied struct{ reason, detail string }

func (d denied) Error() string { return "denied: " + d.reason }

// ErrNoTask is the owner's answer for a task id nobody has. (An agent gets
// the same refusal for it as for another group's task.)
var ErrNoTask = errors.New("no task has the id")

// call runs one operation of c: a refusal or a malformed request is written
// to the audit log (an agent's within its run's budget); do writes the row
// of what it allowed itself (allowed).
func call[T any](ctx context.Context, s *Service, c domain.Caller, op Op, do func(st *runState) (T, error)) (T, error) {
	st := s.begin(c)
	defer s.finish(st)
	v, err := do(st)
	var dn denied
	var in invalid
	switch {
	case st.owner:
		// The owner's own mistakes are not security decisions.
	case errors.As(err, &dn):
		s.audit(ctx, st, op, "deny", cmp.Or(dn.detail, dn.reason))
	case errors.As(err, &in):
		s.audit(ctx, st, op, "error", "malformed request: "+in.msg)
	}
	return v, err
}

// begin registers a call of c. The owner's calls have a state of their own,
// never kept.
func (s *Service) begin(c domain.Caller) *runState {
	if c.Owner {
		return &runState{group: domain.MainFolder, owner: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.runs[c.Run]
	if st == nil {
		st = &runState{id: c.Run, group: c.Group, written: map[string]int{}, counted: map[string]map[Op]int{}}
		if slices.Contains(s.recent[:], c.Run) {
			// A call that was in flight when the socket closed: answered
			// alone, with its own budget, and not kept.
			st.ended = true
		} else {
			s.runs[c.Run] = st
		}
	}
	st.inflight++
	return st
}

// finish ends a call; the last call of an ended run writes its aggregates.
func (s *Service) finish(st *runState) {
	if st.owner {
		return
	}
	s.mu.Lock()
	st.inflight--
	done := st.ended && st.inflight == 0
	if done && s.runs[st.id] == st {
		delete(s.runs, st.id)
	}
	s.mu.Unlock()
	if done {
		s.flush(st)
	}
}

// EndRun is told that an agent run's socket closed: the run's aggregate
// audit rows are written once its last call has been answered.
func (s *Service) EndRun(run string) {
	if s.cfg.Approvals != nil {
		s.cfg.Approvals.EndRun(run)
	}
	s.mu.Lock()
	s.recent[s.next] = run
	s.next = (s.next + 1) % len(s.recent)
	st := s.runs[run]
	if st == nil {
		s.mu.Unlock()
		return
	}
	st.ended = true
	done := st.inflight == 0
	if done {
		delete(s.runs, run)
	}
	s.mu.Unlock()
	if done {
		s.flush(st)
	}
}

// flush writes one row per decision for the calls of st that were counted
// rather than written.
func (s *Service) flush(st *runState) {
	for _, decision := range slices.Sorted(maps.Keys(st.counted)) {
		ops := st.counted[decision]
		total := 0
		var parts []string
		for _, op := range slices.Sorted(maps.Keys(ops)) {
			total += ops[op]
			parts = append(parts, fmt.Sprintf("%s ×%d", op, ops[op]))
		}
		reason := fmt.Sprintf("%d more calls of one run (invocation %s) with this decision, counted instead of logged one by one: %s",
			total, st.id, strings.Join(parts, ", "))
		err := s.cfg.Store.Audit(context.Background(), domain.AuditEntry{Time: s.cfg.Now(), Group: st.group, Operation: "ipc.aggregate", Decision: decision, Reason: reason})
		if err != nil {
			s.cfg.Logger.Error("write audit log", "err", err)
		}
	}
}

// audit writes the row of one call, or counts it once its run has written
// its share of rows of that kind (see MaxAuditedRefusals). An agent's rows
// are "ipc.<op>"; the owner's are "<op>", "by the owner", never counted.
func (s *Service) audit(ctx context.Context, st *runState, op Op, decision, reason string) {
	e := domain.AuditEntry{Time: s.cfg.Now(), Group: st.group, Operation: "ipc." + string(op), Decision: decision, Reason: reason}
	if !st.owner && decision != "allow" && s.cfg.Refused != nil {
		s.cfg.Refused(op)
	}
	if st.owner {
		e.Operation, e.Reason = string(op), reason+" by the owner"
	} else {
		budget, limit := "refused", MaxAuditedRefusals
		if decision == "allow" {
			budget, limit = "allowed", MaxAuditedAllowed
		}
		s.mu.Lock()
		write := st.written[budget] < limit
		if write {
			st.written[budget]++
		} else {
			if st.counted[decision] == nil {
				st.counted[decision] = map[Op]int{}
			}
			st.counted[decision][op]++
		}
		s.mu.Unlock()
		if !write {
			return
		}
	}
	if err := s.cfg.Store.Audit(ctx, e); err != nil {
		s.cfg.Logger.Error("write audit log", "err", err)
	}
}

// Rejected writes to the audit log a request of c that could not be read
// (not an operation, or a body that does not decode), within its run's
// budget like every refusal.
func (s *Service) Rejected(ctx context.Context, c domain.Caller, op Op, err error) {
	st := s.begin(c)
	defer s.finish(st)
	reason := "unknown operation"
	var in invalid
	if errors.As(err, &in) {
		reason = "malformed request: " + in.msg
	}
	s.audit(ctx, st, op, "error", reason)
}

func authorize(c domain.Caller, op Op, t Target) error {
	if d := Authorize(c, op, t); !d.Allow {
		return denied{reason: d.Reason}
	}
	return nil
}

// SendMessage queues text for a chat (chatID nil: the caller's own) and
// returns the chat it goes to. Delivery learns of it from the store.
func (s *Service) SendMessage(ctx context.Context, c domain.Caller, text string, chatID *int64) (int64, error) {
	return call(ctx, s, c, SendMessage, func(st *runState) (int64, error) {
		if strings.TrimSpace(text) == "" {
			return 0, bad("text is required")
		}
		if utf8.RuneCountInString(text) > MaxMessageText {
			return 0, bad("text is longer than %d characters", MaxMessageText)
		}
		target := c.ChatID
		if chatID != nil {
			target = *chatID
		}
		_, registered, err := s.cfg.Store.GroupByChat(ctx, target)
		if err != nil {
			return 0, err
		}
		if err := authorize(c, SendMessage, Target{ChatID: target, ChatRegistered: registered}); err != nil {
			return 0, err
		}
		// Redacted whole, before the split could cut a secret in two.
		text = s.redact(ctx, c.Group, fmt.Sprintf("send_message to chat %d", target), text)
		var out []domain.Outgoing
		for _, chunk := range markup.Messages(text, markup.MaxMessageLen) {
			out = append(out, domain.Outgoing{ChatID: target, Text: chunk, Created: s.cfg.Now()})
		}
		if _, err := s.cfg.Store.Enqueue(ctx, out); err != nil {
			return 0, err
		}
		return target, nil
	})
}

// Guard is the leak guard the service redacts with (nil: none), for the
// parts of the host that share it.
func (s *Service) Guard() *leakguard.Guard { return s.cfg.Guard }

// ScheduleTask creates t (its prompt, schedule and context mode; "" is
// group) for the group t.Group, with its first run.
func (s *Service) ScheduleTask(ctx context.Context, c domain.Caller, t domain.Task) (domain.Task, error) {
	return call(ctx, s, c, ScheduleTask, func(st *runState) (domain.Task, error) {
		g, registered, err := s.cfg.Store.GroupByFolder(ctx, t.Group)
		if err != nil {
			return domain.Task{}, err
		}
		if err := authorize(c, ScheduleTask, Target{Group: t.Group, GroupRegistered: registered}); err != nil {
			return domain.Task{}, err
		}
		if !registered {
			return domain.Task{}, bad("no group has the folder %s", t.Group)
		}
		t.ChatID = g.ChatID
		if t.ContextMode == "" {
			t.ContextMode = domain.ContextGroup
		}
		if err := s.prepareTask(&t); err != nil {
			return domain.Task{}, err
		}
		if st.owner {
			if t, err = s.cfg.Store.CreateTask(ctx, t); err != nil {
				return domain.Task{}, err
			}
		} else if t, err = s.createCapped(ctx, st, t); err != nil {
			return domain.Task{}, err
		}
		s.audit(ctx, st, ScheduleTask, "allow", fmt.Sprintf("task %d for %s: %s %s", t.ID, t.Group, t.ScheduleType, t.ScheduleValue))
		s.tasksChanged()
		return t, nil
	})
}

// createCapped stores an agent's task within its run's and its group's
// quotas.
func (s *Service) createCapped(ctx context.Context, st *runState, t domain.Task) (domain.Task, error) {
	// A slot of the run's quota is taken before the insert (calls of one
	// run may come in parallel) and given back if nothing was stored.
	s.mu.Lock()
	full := st.created >= MaxTasksPerRun
	if !full {
		st.created++
	}
	s.mu.Unlock()
	if full {
		return domain.Task{}, denied{reason: fmt.Sprintf("this run already created %d tasks, the most one run may create", MaxTasksPerRun)}
	}
	t, ok, err := s.cfg.Store.CreateTaskCapped(ctx, t, MaxLiveTasks)
	if err != nil || !ok {
		s.mu.Lock()
		st.created--
		s.mu.Unlock()
	}
	if err != nil {
		return domain.Task{}, err
	}
	if !ok {
		return domain.Task{}, denied{reason: fmt.Sprintf("group %q has %d active or paused tasks, the most allowed; cancel one first", t.Group, MaxLiveTasks)}
	}
	return t, nil
}

// prepareTask checks prompt, schedule and context mode, and sets NextRun.
func (s *Service) prepareTask(t *domain.Task) error {
	if strings.TrimSpace(t.Prompt) == "" {
		return bad("prompt is required")
	}
	if len(t.Prompt) > MaxPrompt {
		return bad("prompt is longer than %d bytes", MaxPrompt)
	}
	if t.ContextMode != domain.ContextGroup && t.ContextMode != domain.ContextIsolated {
		return bad("context_mode must be group or isolated, not %q", t.ContextMode)
	}
	spec, err := scheduler.ParseSchedule(t.ScheduleType, t.ScheduleValue, s.cfg.Loc, s.cfg.MinInterval)
	if err != nil {
		return bad("%v", err)
	}
	first, err := spec.First(s.cfg.Now())
	if err != nil {
		return bad("%v", err)
	}
	t.NextRun = first
	return nil
}

// TaskChange is what update_task may change; nil leaves a field as it is.
type TaskChange struct {
	Prompt, ScheduleType, ScheduleValue, ContextMode *string
}

// ownedTask loads a task and checks the caller may act on it. For an agent,
// a task that does not exist and one it may not touch get the same answer,
// byte for byte: another group's task ids are not its to learn. Only the
// audit log tells the two apart.
func (s *Service) ownedTask(ctx context.Context, c domain.Caller, op Op, id int64) (domain.Task, error) {
	if id <= 0 {
		return domain.Task{}, bad("task_id is required")
	}
	t, ok, err := s.cfg.Store.Task(ctx, id)
	if err != nil {
		return domain.Task{}, err
	}
	if !ok && c.Owner {
		return domain.Task{}, fmt.Errorf("%w %d", ErrNoTask, id)
	}
	answer := fmt.Sprintf("no task %d that this group may change", id)
	if !ok {
		return domain.Task{}, denied{reason: answer, detail: fmt.Sprintf("no task has the id %d", id)}
	}
	if d := Authorize(c, op, Target{Group: t.Group}); !d.Allow {
		return domain.Task{}, denied{reason: answer, detail: fmt.Sprintf("task %d belongs to group %q: %s", id, t.Group, d.Reason)}
	}
	return t, nil
}

// UpdateTask changes a task's prompt, schedule or context mode.
func (s *Service) UpdateTask(ctx context.Context, c domain.Caller, id int64, ch TaskChange) (domain.Task, error) {
	return call(ctx, s, c, UpdateTask, func(st *runState) (domain.Task, error) {
		t, err := s.ownedTask(ctx, c, UpdateTask, id)
		if err != nil {
			return domain.Task{}, err
		}
		if t.Status == domain.TaskCompleted || t.Status == domain.TaskCancelled {
			return domain.Task{}, bad("task %d is %s and cannot be changed", t.ID, t.Status)
		}
		for _, f := range []struct{ dst, src *string }{
			{&t.Prompt, ch.Prompt}, {&t.ScheduleType, ch.ScheduleType}, {&t.ScheduleValue, ch.ScheduleValue}, {&t.ContextMode, ch.ContextMode},
		} {
			if f.src != nil {
				*f.dst = *f.src
			}
		}
		if err := s.prepareTask(&t); err != nil {
			return domain.Task{}, err
		}
		if err := s.cfg.Store.UpdateTask(ctx, t); err != nil {
			return domain.Task{}, err
		}
		s.audit(ctx, st, UpdateTask, "allow", fmt.Sprintf("task %d of %s", t.ID, t.Group))
		s.tasksChanged()
		return t, nil
	})
}

// ListTasks lists the tasks the caller may see: of folder ("" for every
// group's) when it is main or the owner, else its own group's.
func (s *Service) ListTasks(ctx context.Context, c domain.Caller, folder string) ([]domain.Task, error) {
	return call(ctx, s, c, ListTasks, func(*runState) ([]domain.Task, error) {
		if err := authorize(c, ListTasks, Target{}); err != nil {
			return nil, err
		}
		if scope := TaskScope(c); scope != "" {
			folder = scope
		}
		return s.cfg.Store.ListTasks(ctx, folder)
	})
}

// ChangeTaskStatus pauses, resumes or cancels task id (op is PauseTask,
// ResumeTask or CancelTask). Resuming computes the next run from now.
func (s *Service) ChangeTaskStatus(ctx context.Context, c domain.Caller, op Op, id int64) (domain.Task, error) {
	return call(ctx, s, c, op, func(st *runState) (domain.Task, error) {
		t, err := s.ownedTask(ctx, c, op, id)
		if err != nil {
			return domain.Task{}, err
		}
		if err := s.changeStatus(ctx, &t, op); err != nil {
			return domain.Task{}, err
		}
		s.audit(ctx, st, op, "allow", fmt.Sprintf("task %d of %s", t.ID, t.Group))
		s.tasksChanged()
		return t, nil
	})
}

func (s *Service) changeStatus(ctx context.Context, t *domain.Task, op Op) error {
	switch op {
	case PauseTask:
		if t.Status != domain.TaskActive {
			return bad("task %d is %s, not active", t.ID, t.Status)
		}
		t.Status = domain.TaskPaused
	case ResumeTask:
		if t.Status != domain.TaskPaused {
			return bad("task %d is %s, not paused", t.ID, t.Status)
		}
		spec, err := scheduler.ParseSchedule(t.ScheduleType, t.ScheduleValue, s.cfg.Loc, s.cfg.MinInterval)
		if err != nil {
			return bad("task %d cannot resume: %v", t.ID, err)
		}
		now := s.cfg.Now()
		next := t.NextRun
		if next.IsZero() || next.Before(now) {
			if t.ScheduleType == domain.ScheduleOnce {
				next = now // a missed one-off runs once, now
			} else if next, err = spec.First(now); err != nil {
				return bad("task %d cannot resume: %v", t.ID, err)
			}
		}
		if err := s.cfg.Store.SetTaskNextRun(ctx, t.ID, next, time.Time{}); err != nil {
			return err
		}
		t.NextRun = next
		t.Status = domain.TaskActive
	case CancelTask:
		if t.Status == domain.TaskCancelled || t.Status == domain.TaskCompleted {
			return bad("task %d is already %s", t.ID, t.Status)
		}
		t.Status = domain.TaskCancelled
	default:
		return fmt.Errorf("change status: unknown operation %q", op)
	}
	return s.cfg.Store.SetTaskStatus(ctx, t.ID, t.Status)
}

// GroupRequest is a chat to register as a group.
type GroupRequest struct {
	ChatID  int64
	Folder  string
	Name    string // default: the folder
	Trigger string // default: "@" + the assistant's name
	Mounts  []domain.MountRequest
}

// RegisterGroup validates and registers a non-main group, and creates its
// folder.
func (s *Service) RegisterGroup(ctx context.Context, c domain.Caller, r GroupRequest) (domain.Group, error) {
	return call(ctx, s, c, RegisterGroup, func(st *runState) (domain.Group, error) {
		main, _, err := s.cfg.Store.GroupByFolder(ctx, domain.MainFolder)
		if err != nil {
			return domain.Group{}, err
		}
		target := Target{MakesMain: r.Folder == domain.MainFolder, RegistersChatOfMain: r.ChatID != 0 && r.ChatID == main.ChatID}
		if err := authorize(c, RegisterGroup, target); err != nil {
			return domain.Group{}, err
		}
		if len(r.Mounts) > 0 {
			if s.cfg.Mounts == nil {
				return domain.Group{}, denied{reason: "extra mounts are not available"}
			}
			// The group is not main, whatever its folder claims.
			if err := s.cfg.Mounts.CheckRequests(r.Mounts, false); err != nil {
				return domain.Group{}, denied{reason: err.Error()}
			}
		}
		g, err := s.registerGroup(ctx, r)
		if err != nil {
			return domain.Group{}, err
		}
		s.audit(ctx, st, RegisterGroup, "allow", fmt.Sprintf("chat %d as folder %s", g.ChatID, g.Folder))
		return g, nil
	})
}

func (s *Service) registerGroup(ctx context.Context, r GroupRequest) (domain.Group, error) {
	st := s.cfg.Store
	if r.ChatID == 0 {
		return domain.Group{}, bad("chat_id is required: the numeric Telegram chat id")
	}
	if err := domain.ValidateFolder(r.Folder); err != nil {
		return domain.Group{}, bad("%v", err)
	}
	name := strings.TrimSpace(r.Name)
	if name == "" {
		name = r.Folder
	}
	if utf8.RuneCountInString(name) > MaxName {
		return domain.Group{}, bad("name is longer than %d characters", MaxName)
	}
	if tr := r.Trigger; tr != "" && (!strings.HasPrefix(tr, "@") || strings.ContainsAny(tr, " \t\n") || len(tr) > 64) {
		return domain.Group{}, bad("trigger must look like @Word, not %q", tr)
	}
	if main, ok, err := st.GroupByFolder(ctx, domain.MainFolder); err != nil {
		return domain.Group{}, err
	} else if ok && main.ChatID == r.ChatID {
		return domain.Group{}, bad("chat %d is the main chat", r.ChatID)
	}
	if g, ok, err := st.GroupByChat(ctx, r.ChatID); err != nil {
		return domain.Group{}, err
	} else if ok && g.Folder != r.Folder {
		return domain.Group{}, bad("chat %d is already registered as folder %s", r.ChatID, g.Folder)
	}
	if g, ok, err := st.GroupByFolder(ctx, r.Folder); err != nil {
		return domain.Group{}, err
	} else if ok && g.ChatID != r.ChatID {
		return domain.Group{}, bad("folder %s already belongs to chat %d", r.Folder, g.ChatID)
	}
	// GroupsDir is resolved (config); a symlink in it now is not followed.
	if err := beneath.MkdirAll(filepath.Join(s.cfg.GroupsDir, r.Folder), 0o755); err != nil {
		return domain.Group{}, fmt.Errorf("create folder of %q: %w", r.Folder, err)
	}
	g := domain.Group{ChatID: r.ChatID, Name: name, Folder: r.Folder, Trigger: r.Trigger, Mounts: r.Mounts, Added: time.Now()}
	if err := st.PutGroup(ctx, g); err != nil {
		return domain.Group{}, err
	}
	return g, nil
}

// UnregisterGroup removes a group's registration (its folder is kept) and
// reports whether there was one.
func (s *Service) UnregisterGroup(ctx context.Context, c domain.Caller, folder string) (bool, error) {
	return call(ctx, s, c, UnregisterGroup, func(st *runState) (bool, error) {
		if err := authorize(c, UnregisterGroup, Target{Group: folder}); err != nil {
			return false, err
		}
		if folder == domain.MainFolder {
			return false, bad("the main group cannot be unregistered")
		}
		ok, err := s.cfg.Store.DeleteGroup(ctx, folder)
		if err != nil || !ok {
			return false, err
		}
		s.audit(ctx, st, UnregisterGroup, "allow", "folder "+folder)
		return true, nil
	})
}

// Chat is a chat the bot has seen, with the folder of its group when it is
// registered.
type Chat struct {
	domain.Chat
	Folder string
}

// ListChats lists every chat the bot has seen.
func (s *Service) ListChats(ctx context.Context, c domain.Caller) ([]Chat, error) {
	return call(ctx, s, c, ListChats, func(*runState) ([]Chat, error) {
		if err := authorize(c, ListChats, Target{}); err != nil {
			return nil, err
		}
		chats, err := s.cfg.Store.ListChats(ctx)
		if err != nil {
			return nil, err
		}
		groups, err := s.cfg.Store.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		folders := map[int64]string{}
		for _, g := range groups {
			folders[g.ChatID] = g.Folder
		}
		out := make([]Chat, 0, len(chats))
		for _, ch := range chats {
			out = append(out, Chat{Chat: ch, Folder: folders[ch.ID]})
		}
		return out, nil
	})
}
