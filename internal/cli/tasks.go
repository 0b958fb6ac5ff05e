package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/scheduler"
)

// tasksCommand manages scheduled tasks. A running serve notices changes at
// its next wake-up at the latest (it re-reads the due time from the database).
func tasksCommand() *command {
	idCmd := func(name, summary string, run action) *command {
		return &command{name: name, args: "<id>", min: 1, max: 1, summary: summary,
			detail: "id is the task's number as `tasks list` shows it (\"#3\" or \"3\").", flags: noFlags(run)}
	}
	return &command{name: "tasks", summary: "scheduled tasks", dflt: "list", subs: []*command{
		{name: "list", args: "[folder]", max: 1, summary: "scheduled tasks, of every group or of one",
			flags: noFlags(tasksList)},
		{name: "add", args: "<folder> <cron|interval|once> <value> <prompt>", min: 4, max: -1,
			summary: "schedule a prompt for a group",
			detail: "value is a cron line (quote it: \"0 9 * * *\"), a Go duration for interval (30m), or an\n" +
				"RFC 3339 time for once (2026-01-02T09:00:00+01:00). The prompt is the rest of the line;\n" +
				"put \"--\" before a prompt that starts with \"-\". Cron times are in TZ.",
			flags: func(fs *flag.FlagSet) action {
				isolated := fs.Bool("isolated", false, "run in a fresh context, not in the group's conversation")
				return func(ctx context.Context, s *session, args []string) error {
					return tasksAdd(ctx, s, args, *isolated)
				}
			}},
		idCmd("pause", "pause a task", statusChange(ops.PauseTask)),
		idCmd("resume", "resume a paused task", statusChange(ops.ResumeTask)),
		idCmd("cancel", "cancel a task", statusChange(ops.CancelTask)),
		idCmd("runs", "the run log of a task", tasksRuns),
	}}
}

func tasksList(ctx context.Context, s *session, args []string) error {
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	folder := ""
	if len(args) > 0 {
		folder = args[0]
	}
	ts, err := svc.ListTasks(ctx, domain.Owner(), folder)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGROUP\tSCHEDULE\tCONTEXT\tSTATUS\tNEXT RUN\tPROMPT")
	for _, t := range ts {
		next := "-"
		if !t.NextRun.IsZero() {
			next = t.NextRun.In(s.cfg.TZ).Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s %s\t%s\t%s\t%s\t%s\n", t.ID, t.Group, t.ScheduleType, t.ScheduleValue, t.ContextMode, t.Status, next, oneLine(t.Prompt, 60))
	}
	return tw.Flush()
}

func tasksAdd(ctx context.Context, s *session, args []string, isolated bool) error {
	mode := domain.ContextGroup
	if isolated {
		mode = domain.ContextIsolated
	}
	svc, err := s.ops(ctx)
	if err != nil {
		return err
	}
	g, err := groupByFolder(ctx, s.st, args[0])
	if err != nil {
		return err
	}
	t, err := svc.ScheduleTask(ctx, domain.Owner(), domain.Task{Group: g.Folder, ScheduleType: args[1], ScheduleValue: args[2],
		Prompt: strings.Join(args[3:], " "), ContextMode: mode})
	if err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, "scheduled", scheduler.Describe(t, s.cfg.TZ))
	return nil
}

// taskID reads an <id> argument: "3" or "#3".
func taskID(arg string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(arg, "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badUsage("id %q: want a task number, e.g. 3", arg)
	}
	return id, nil
}

// task reads the task an <id> argument names.
func (s *session) task(ctx context.Context, arg string) (domain.Task, error) {
	id, err := taskID(arg)
	if err != nil {
		return domain.Task{}, err
	}
	st, err := s.store(ctx)
	if err != nil {
		return domain.Task{}, err
	}
	t, ok, err := st.Task(ctx, id)
	if err != nil {
		return domain.Task{}, err
	}
	if !ok {
		return domain.Task{}, fmt.Errorf("no task has the id %d", id)
	}
	return t, nil
}

// statusChange is pause, resume or cancel.
func statusChange(op ops.Op) action {
	return func(ctx context.Context, s *session, args []string) error {
		id, err := taskID(args[0])
		if err != nil {
			return err
		}
		svc, err := s.ops(ctx)
		if err != nil {
			return err
		}
		t, err := svc.ChangeTaskStatus(ctx, domain.Owner(), op, id)
		if err != nil {
			return err
		}
		fmt.Fprintln(s.stdout, scheduler.Describe(t, s.cfg.TZ))
		return nil
	}
}

func tasksRuns(ctx context.Context, s *session, args []string) error {
	t, err := s.task(ctx, args[0])
	if err != nil {
		return err
	}
	runs, err := s.st.TaskRuns(ctx, t.ID, 50)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, scheduler.Describe(t, s.cfg.TZ))
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tDURATION\tSTATUS\tRESULT / ERROR")
	for _, r := range runs {
		out := r.Result
		if r.Error != "" {
			out = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Started.In(s.cfg.TZ).Format(time.RFC3339), r.Duration.Round(time.Millisecond), r.Status, oneLine(out, 80))
	}
	return tw.Flush()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
