package router

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strconv"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
)

// maxResultExcerpt bounds what a task run's log keeps of its output.
const maxResultExcerpt = 2000

// runTask runs one scheduled task as its group, with that group's sandbox and
// rights, logs the run, and sends the output to the group's chat.
func (r *Router) runTask(ctx context.Context, t domain.Task) error {
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, t.Group)
	if err != nil {
		return fmt.Errorf("task %d: look up group %q: %w", t.ID, t.Group, err)
	}
	start := time.Now()
	run := domain.TaskRun{TaskID: t.ID, Started: start}
	var ans runner.Answer
	if !ok {
		err = fmt.Errorf("task %d of %q: %w", t.ID, t.Group, errGroupGone)
	} else {
		stopTyping := r.typing(ctx, g.ChatID, 0)
		ans, err = r.cfg.Agents.Start(ctx, runner.Request{Group: g, Prompt: taskPrompt(t, r.cfg.TZ), ContextMode: t.ContextMode, TaskID: t.ID}).Wait()
		stopTyping()
		r.limits.note(t.Group, err)
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not a failure of the task
	}
	run.Duration = time.Since(start)
	if err == nil {
		ans.Text = r.redact(ctx, t.Group, fmt.Sprintf("the result of task %d", t.ID), ans.Text)
	}
	if err != nil {
		// The log keeps the host's words only: /tasks shows it to the owner.
		run.Status, run.Error = "error", failure(err)
	} else {
		run.Status, run.Result = "ok", excerpt(ans.Text)
	}
	if _, lerr := r.cfg.Store.AddTaskRun(ctx, run); lerr != nil {
		r.log.Error("log task run", "task", t.ID, "err", lerr)
	}
	if t.ScheduleType == domain.ScheduleOnce {
		if serr := r.cfg.Store.SetTaskStatus(ctx, t.ID, domain.TaskCompleted); serr != nil {
			r.log.Error("complete one-off task", "task", t.ID, "err", serr)
		}
	}
	if errors.Is(err, runner.ErrBudget) {
		r.overBudget(ctx, g, 0, err) // told once a day, like the group's messages
		return nil
	}
	if err != nil {
		r.log.Warn("task failed", "task", t.ID, "group", t.Group, "err", err)
		if main, ok, _ := r.cfg.Store.GroupByFolder(ctx, domain.MainFolder); ok {
			_ = r.reply(ctx, main.ChatID, 0, ownerTaskNotice(t, err))
		}
		return nil
	}
	if ans.Text != "" {
		return r.reply(ctx, g.ChatID, 0, ans.Text)
	}
	return nil
}

// taskPrompt presents a task to the agent. The prompt was written by the
// group (untrusted outside main), so it is escaped like any message.
func taskPrompt(t domain.Task, loc *time.Location) string {
	return `<scheduled_task id="` + strconv.FormatInt(t.ID, 10) + `" schedule="` + html.EscapeString(t.ScheduleType+" "+t.ScheduleValue) +
		`" time="` + time.Now().In(loc).Format(time.RFC3339) + `">` + html.EscapeString(t.Prompt) + "</scheduled_task>"
}

func excerpt(s string) string {
	r := []rune(s)
	if len(r) <= maxResultExcerpt {
		return s
	}
	return string(r[:maxResultExcerpt]) + "…"
}
