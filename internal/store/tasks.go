package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

func validScheduleType(t string) bool {
	switch t {
	case domain.ScheduleCron, domain.ScheduleInterval, domain.ScheduleOnce:
		return true
	}
	return false
}

func validContextMode(m string) bool {
	return m == domain.ContextGroup || m == domain.ContextIsolated
}

func validTaskStatus(s string) bool {
	switch s {
	case domain.TaskActive, domain.TaskPaused, domain.TaskCompleted, domain.TaskCancelled:
		return true
	}
	return false
}

// CreateTask stores t and returns it with its ID. Defaults: ContextMode
// "group", Status "active", Created now. The schedule value is stored as
// given; parsing it and computing NextRun is the scheduler's job.
func (s *Store) CreateTask(ctx context.Context, t domain.Task) (domain.Task, error) {
	t, _, err := s.createTask(ctx, t, 0)
	return t, err
}

// CreateTaskCapped is CreateTask unless t's group already has max live tasks
// (active or paused: a paused task can be resumed). ok is false then, and
// nothing was stored. The count and the insert are one statement, so
// concurrent calls cannot overshoot the cap.
func (s *Store) CreateTaskCapped(ctx context.Context, t domain.Task, max int) (_ domain.Task, ok bool, _ error) {
	if max <= 0 {
		return domain.Task{}, false, fmt.Errorf("create task for %q: cap %d", t.Group, max)
	}
	return s.createTask(ctx, t, max)
}

// createTask inserts t; max > 0 caps the group's live tasks.
func (s *Store) createTask(ctx context.Context, t domain.Task, max int) (domain.Task, bool, error) {
	if t.ContextMode == "" {
		t.ContextMode = domain.ContextGroup
	}
	if t.Status == "" {
		t.Status = domain.TaskActive
	}
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	switch {
	case t.Group == "":
		return domain.Task{}, false, errors.New("create task: empty group")
	case t.Prompt == "":
		return domain.Task{}, false, fmt.Errorf("create task for %q: empty prompt", t.Group)
	case !validScheduleType(t.ScheduleType):
		return domain.Task{}, false, fmt.Errorf("create task for %q: unknown schedule type %q", t.Group, t.ScheduleType)
	case !validContextMode(t.ContextMode):
		return domain.Task{}, false, fmt.Errorf("create task for %q: unknown context mode %q", t.Group, t.ContextMode)
	case !validTaskStatus(t.Status):
		return domain.Task{}, false, fmt.Errorf("create task for %q: unknown status %q", t.Group, t.Status)
	}
	t.NextRun, t.LastRun, t.Created = asStored(t.NextRun), asStored(t.LastRun), asStored(t.Created)
	args := []any{t.Group, t.ChatID, t.Prompt, t.ScheduleType, t.ScheduleValue, t.ContextMode, t.Status,
		nullMillis(t.NextRun), millis(t.LastRun), millis(t.Created)}
	q := `INSERT INTO tasks (group_folder, chat_id, prompt, schedule_type, schedule_value, context_mode, status, next_run, last_run, created)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`
	if max > 0 {
		q = `INSERT INTO tasks (group_folder, chat_id, prompt, schedule_type, schedule_value, context_mode, status, next_run, last_run, created)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10
		WHERE (SELECT COUNT(*) FROM tasks WHERE group_folder = $11 AND status IN ($12, $13)) < $14
		RETURNING id`
		args = append(args, t.Group, domain.TaskActive, domain.TaskPaused, max)
	}
	err := s.w.QueryRowContext(ctx, q, args...).Scan(&t.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Task{}, false, nil // at the cap
	}
	if err != nil {
		return domain.Task{}, false, fmt.Errorf("create task for %q: %w", t.Group, err)
	}
	return t, true, nil
}

const taskColumns = `id, group_folder, chat_id, prompt, schedule_type, schedule_value, context_mode, status, next_run, last_run, created`

func scanTask(sc scanner) (domain.Task, error) {
	var t domain.Task
	err := sc.Scan(&t.ID, &t.Group, &t.ChatID, &t.Prompt, &t.ScheduleType, &t.ScheduleValue,
		&t.ContextMode, &t.Status, timeCol{&t.NextRun}, timeCol{&t.LastRun}, timeCol{&t.Created})
	return t, err
}

func (s *Store) queryTasks(ctx context.Context, query string, args ...any) ([]domain.Task, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []domain.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Task returns the task with id.
func (s *Store) Task(ctx context.Context, id int64) (domain.Task, bool, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Task{}, false, nil
	}
	if err != nil {
		return domain.Task{}, false, fmt.Errorf("task %d: %w", id, err)
	}
	return t, true, nil
}

// ListTasks returns the tasks of folder ("" = all groups) by id.
func (s *Store) ListTasks(ctx context.Context, folder string) ([]domain.Task, error) {
	q := `SELECT ` + taskColumns + ` FROM tasks ORDER BY id`
	args := []any{}
	if folder != "" {
		q = `SELECT ` + taskColumns + ` FROM tasks WHERE group_folder = $1 ORDER BY id`
		args = append(args, folder)
	}
	ts, err := s.queryTasks(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks of %q: %w", folder, err)
	}
	return ts, nil
}

// SetTaskStatus sets the status of task id; ErrNotFound if there is none.
func (s *Store) SetTaskStatus(ctx context.Context, id int64, status string) error {
	if !validTaskStatus(status) {
		return fmt.Errorf("set status of task %d: unknown status %q", id, status)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tasks SET status = $1 WHERE id = $2`, status, id)
	return checkUpdated(res, err, fmt.Sprintf("set status of task %d", id))
}

// SetTaskNextRun records when task id runs next (zero: never again) and
// when it last ran; a zero lastRun keeps the stored one (a resume computes
// a new next run without having run). ErrNotFound if there is no such task.
func (s *Store) SetTaskNextRun(ctx context.Context, id int64, next time.Time, lastRun time.Time) error {
	res, err := s.w.ExecContext(ctx, `
		UPDATE tasks SET next_run = $1, last_run = COALESCE($2, last_run) WHERE id = $3`,
		nullMillis(next), nullMillis(lastRun), id)
	return checkUpdated(res, err, fmt.Sprintf("set next run of task %d", id))
}

// checkUpdated turns an UPDATE that matched no row into ErrNotFound.
func checkUpdated(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// DueTasks returns the active tasks whose next run is at or before now,
// earliest first.
func (s *Store) DueTasks(ctx context.Context, now time.Time) ([]domain.Task, error) {
	ts, err := s.queryTasks(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE status = $1 AND next_run IS NOT NULL AND next_run <= $2 ORDER BY next_run, id`,
		domain.TaskActive, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("due tasks: %w", err)
	}
	return ts, nil
}

// NextDue returns the earliest next run among active tasks; false if no
// active task is scheduled.
func (s *Store) NextDue(ctx context.Context) (time.Time, bool, error) {
	var ms sql.NullInt64
	if err := s.r.QueryRowContext(ctx,
		`SELECT MIN(next_run) FROM tasks WHERE status = $1 AND next_run IS NOT NULL`,
		domain.TaskActive).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next due task: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64).UTC(), true, nil
}

// AddTaskRun logs one execution of a task and returns the log row's id.
// Started defaults to now; Duration is stored in whole milliseconds.
func (s *Store) AddTaskRun(ctx context.Context, r domain.TaskRun) (int64, error) {
	if r.Status == "" {
		return 0, fmt.Errorf("add run of task %d: empty status", r.TaskID)
	}
	if r.Started.IsZero() {
		r.Started = time.Now()
	}
	var id int64
	err := s.w.QueryRowContext(ctx, `
		INSERT INTO task_runs (task_id, started, duration_ms, status, result, error) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		r.TaskID, millis(r.Started), r.Duration.Milliseconds(), r.Status, r.Result, r.Error).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("add run of task %d: %w", r.TaskID, err)
	}
	return id, nil
}

// TaskRuns returns up to limit runs of taskID, newest first (limit <= 0: all).
func (s *Store) TaskRuns(ctx context.Context, taskID int64, limit int) ([]domain.TaskRun, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT id, task_id, started, duration_ms, status, result, error
		FROM task_runs WHERE task_id = $1 ORDER BY id DESC LIMIT $2`, taskID, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("runs of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []domain.TaskRun
	for rows.Next() {
		var (
			r  domain.TaskRun
			ms int64
		)
		if err := rows.Scan(&r.ID, &r.TaskID, timeCol{&r.Started}, &ms, &r.Status, &r.Result, &r.Error); err != nil {
			return nil, fmt.Errorf("runs of task %d: %w", taskID, err)
		}
		r.Duration = time.Duration(ms) * time.Millisecond
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of task %d: %w", taskID, err)
	}
	return out, nil
}

// UpdateTask rewrites the prompt, schedule, context mode and next run of
// task t.ID; ErrNotFound if there is none.
func (s *Store) UpdateTask(ctx context.Context, t domain.Task) error {
	switch {
	case t.Prompt == "":
		return fmt.Errorf("update task %d: empty prompt", t.ID)
	case !validScheduleType(t.ScheduleType):
		return fmt.Errorf("update task %d: unknown schedule type %q", t.ID, t.ScheduleType)
	case !validContextMode(t.ContextMode):
		return fmt.Errorf("update task %d: unknown context mode %q", t.ID, t.ContextMode)
	}
	res, err := s.w.ExecContext(ctx, `
		UPDATE tasks SET prompt = $1, schedule_type = $2, schedule_value = $3, context_mode = $4, next_run = $5 WHERE id = $6`,
		t.Prompt, t.ScheduleType, t.ScheduleValue, t.ContextMode, nullMillis(t.NextRun), t.ID)
	return checkUpdated(res, err, fmt.Sprintf("update task %d", t.ID))
}
