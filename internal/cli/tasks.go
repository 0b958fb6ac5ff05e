package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ipc"
	"github.com/clawpen/clawpen/internal/scheduler"
)

// tasks manages scheduled tasks. A running serve notices changes at its next
// wake-up at the latest (it re-reads the due time from the database).
func tasks(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"list"}
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "clawpen tasks:", err); return 1 }
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	minInterval, err := app.MinInterval(os.Getenv)
	if err != nil {
		return fail(err)
	}
	taskID := func() (domain.Task, error) {
		if len(args) != 2 {
			return domain.Task{}, fmt.Errorf("usage: clawpen tasks %s <id>", args[0])
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(args[1], "#"), 10, 64)
		if err != nil {
			return domain.Task{}, fmt.Errorf("%q is not a task id", args[1])
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
	switch args[0] {
	case "list":
		folder := ""
		if len(args) > 1 {
			folder = args[1]
		}
		ts, err := st.ListTasks(ctx, folder)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tGROUP\tSCHEDULE\tCONTEXT\tSTATUS\tNEXT RUN\tPROMPT")
		for _, t := range ts {
			next := "-"
			if !t.NextRun.IsZero() {
				next = t.NextRun.In(cfg.TZ).Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s %s\t%s\t%s\t%s\t%s\n", t.ID, t.Group, t.ScheduleType, t.ScheduleValue, t.ContextMode, t.Status, next, oneLine(t.Prompt, 60))
		}
		tw.Flush()
		return 0
	case "add":
		rest := args[1:]
		mode := domain.ContextGroup
		if n := len(rest); n > 0 && rest[n-1] == "--isolated" {
			mode, rest = domain.ContextIsolated, rest[:n-1]
		}
		if len(rest) < 4 {
			return fail(errors.New(`usage: clawpen tasks add <folder> <cron|interval|once> <value> <prompt> [--isolated] (quote a cron value: "0 9 * * *")`))
		}
		g, ok, err := st.GroupByFolder(ctx, rest[0])
		if err != nil {
			return fail(err)
		}
		if !ok {
			return fail(fmt.Errorf("no group has the folder %q", rest[0]))
		}
		t, err := ipc.CreateTask(ctx, st, domain.Task{Group: g.Folder, ChatID: g.ChatID, ScheduleType: rest[1], ScheduleValue: rest[2],
			Prompt: strings.Join(rest[3:], " "), ContextMode: mode}, cfg.TZ, minInterval, time.Now())
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, "scheduled", scheduler.Describe(t, cfg.TZ))
		return 0
	case "pause", "resume", "cancel":
		t, err := taskID()
		if err != nil {
			return fail(err)
		}
		if err := ipc.ChangeStatus(ctx, st, &t, args[0]+"_task", cfg.TZ, minInterval, time.Now()); err != nil {
			return fail(err)
		}
		_ = st.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: domain.MainFolder, Operation: "cli." + args[0] + "_task", Decision: "allow", Reason: fmt.Sprintf("task %d of %s", t.ID, t.Group)})
		fmt.Fprintln(stdout, scheduler.Describe(t, cfg.TZ))
		return 0
	case "runs":
		t, err := taskID()
		if err != nil {
			return fail(err)
		}
		runs, err := st.TaskRuns(ctx, t.ID, 50)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, scheduler.Describe(t, cfg.TZ))
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STARTED\tDURATION\tSTATUS\tRESULT / ERROR")
		for _, r := range runs {
			out := r.Result
			if r.Error != "" {
				out = r.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Started.In(cfg.TZ).Format(time.RFC3339), r.Duration.Round(time.Millisecond), r.Status, oneLine(out, 80))
		}
		tw.Flush()
		return 0
	default:
		return fail(fmt.Errorf("unknown subcommand %q: use list, add, pause, resume, cancel or runs", args[0]))
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
