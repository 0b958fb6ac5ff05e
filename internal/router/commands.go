package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/command"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/ipc"
	"github.com/clawpen/clawpen/internal/scheduler"
)

// Commands lists the owner's admin commands (also registered with Telegram).
var Commands = []struct{ Name, Description string }{
	{"groups", "list registered groups and chats seen"},
	{"register", "<chat_id> <folder> [name]: register a group"},
	{"unregister", "<folder>: unregister a group"},
	{"tasks", "[folder]: scheduled tasks"},
	{"schedule", "<folder> <cron|interval|once> <value> <prompt>: schedule a task (quote a cron value)"},
	{"pause", "<id>: pause a task"},
	{"resume", "<id>: resume a task"},
	{"cancel", "<id>: cancel a task"},
	{"status", "sandboxes, queues and next due tasks"},
	{"help", "what I can do"},
}

// command runs an admin command from the owner in the main chat. It reports
// false for text that is not one of ours, which then goes to the agent.
func (r *Router) command(ctx context.Context, main domain.Group, in Inbound) (bool, error) {
	cmd, err := command.Parse(in.Text, r.cfg.BotUsername)
	if errors.Is(err, command.ErrNotCommand) {
		return false, nil
	}
	answer := func(text string) (bool, error) { return true, r.reply(ctx, in.ChatID, in.ThreadID, text) }
	if err != nil {
		return answer("Could not read the command: " + err.Error())
	}
	switch cmd.Name {
	case "help", "start":
		return answer(r.help())
	case "pair":
		return answer("Already paired: you are the owner.")
	case "groups":
		text, err := r.groupsText(ctx)
		if err != nil {
			return true, err
		}
		return answer(text)
	case "register":
		return answer(r.register(ctx, cmd))
	case "unregister":
		return answer(r.unregister(ctx, cmd))
	case "status":
		return answer(r.status(ctx))
	case "tasks":
		return answer(r.tasksText(ctx, cmd))
	case "schedule":
		return answer(r.schedule(ctx, cmd))
	case "pause", "resume", "cancel":
		return answer(r.taskStatus(ctx, cmd))
	default:
		return false, nil
	}
}

func (r *Router) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "I am %s. Here, every message goes to me. In a registered group, members call me with @%s, a mention or a reply.\n\nCommands:\n", r.cfg.AssistantName, r.cfg.AssistantName)
	for _, c := range Commands {
		fmt.Fprintf(&b, "/%s %s\n", c.Name, c.Description)
	}
	return b.String()
}

func (r *Router) groupsText(ctx context.Context) (string, error) {
	groups, err := r.cfg.Store.ListGroups(ctx)
	if err != nil {
		return "", fmt.Errorf("list groups: %w", err)
	}
	chats, err := r.cfg.Store.ListChats(ctx)
	if err != nil {
		return "", fmt.Errorf("list chats: %w", err)
	}
	registered := map[int64]bool{}
	var b strings.Builder
	b.WriteString("Registered groups:\n")
	for _, g := range groups {
		registered[g.ChatID] = true
		fmt.Fprintf(&b, "• %s — folder %s, chat %d\n", g.Name, g.Folder, g.ChatID)
	}
	b.WriteString("\nChats seen, not registered:\n")
	n := 0
	for _, c := range chats {
		if registered[c.ID] || c.Type == "private" {
			continue
		}
		n++
		fmt.Fprintf(&b, "• %s (%s) — chat %d\n", c.Title, c.Type, c.ID)
	}
	if n == 0 {
		b.WriteString("none\n")
	}
	return b.String(), nil
}

func (r *Router) register(ctx context.Context, cmd command.Command) string {
	if len(cmd.Args) < 2 {
		return "Usage: /register <chat_id> <folder> [display name]"
	}
	chatID, err := strconv.ParseInt(cmd.Args[0], 10, 64)
	if err != nil || chatID == 0 {
		return fmt.Sprintf("Not registered: %q is not a numeric Telegram chat id.", cmd.Args[0])
	}
	folder := cmd.Args[1]
	name := strings.Join(cmd.Args[2:], " ")
	if name == "" {
		name = r.chatTitle(ctx, chatID)
	}
	g, err := ipc.RegisterGroup(ctx, r.cfg.Store, r.cfg.GroupsDir, chatID, folder, name, "")
	if err != nil {
		return "Not registered: " + err.Error()
	}
	_ = r.audit(ctx, domain.MainFolder, "register_group", "allow", fmt.Sprintf("chat %d as folder %s", chatID, folder))
	return fmt.Sprintf("Registered %s (chat %d) with folder groups/%s. Members call me with @%s.", g.Name, g.ChatID, g.Folder, r.cfg.AssistantName)
}

// chatTitle is the title Telegram gave a chat we have seen, or "".
func (r *Router) chatTitle(ctx context.Context, chatID int64) string {
	chats, err := r.cfg.Store.ListChats(ctx)
	if err != nil {
		return ""
	}
	for _, c := range chats {
		if c.ID == chatID {
			return c.Title
		}
	}
	return ""
}

func (r *Router) unregister(ctx context.Context, cmd command.Command) string {
	if len(cmd.Args) != 1 {
		return "Usage: /unregister <folder>"
	}
	folder := cmd.Args[0]
	if folder == domain.MainFolder {
		return "The main group cannot be unregistered."
	}
	ok, err := r.cfg.Store.DeleteGroup(ctx, folder)
	if err != nil {
		return "Not unregistered: " + err.Error()
	}
	if !ok {
		return fmt.Sprintf("No group has the folder %s.", folder)
	}
	_ = r.audit(ctx, domain.MainFolder, "unregister_group", "allow", "folder "+folder)
	return fmt.Sprintf("Unregistered %s. Its folder groups/%s is kept.", folder, folder)
}

func (r *Router) status(ctx context.Context) string {
	var b strings.Builder
	groups, err := r.cfg.Store.ListGroups(ctx)
	if err != nil {
		return "Status unavailable: " + err.Error()
	}
	fmt.Fprintf(&b, "%s: %d registered groups.\n", r.cfg.AssistantName, len(groups))
	if r.cfg.Status != nil {
		b.WriteString(r.cfg.Status(ctx))
	}
	ts, err := r.cfg.Store.ListTasks(ctx, "")
	if err != nil {
		return b.String() + "Tasks unavailable: " + err.Error()
	}
	var due []domain.Task
	for _, t := range ts {
		if t.Status == domain.TaskActive && !t.NextRun.IsZero() {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b domain.Task) int { return a.NextRun.Compare(b.NextRun) })
	fmt.Fprintf(&b, "Next due tasks (%d active):\n", len(due))
	for _, t := range due[:min(5, len(due))] {
		b.WriteString(scheduler.Describe(t, r.cfg.TZ) + "\n")
	}
	return b.String()
}

func (r *Router) tasksText(ctx context.Context, cmd command.Command) string {
	folder := ""
	if len(cmd.Args) > 0 {
		folder = cmd.Args[0]
	}
	ts, err := r.cfg.Store.ListTasks(ctx, folder)
	if err != nil {
		return "Tasks unavailable: " + err.Error()
	}
	if len(ts) == 0 {
		return "No tasks."
	}
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(scheduler.Describe(t, r.cfg.TZ))
		if runs, err := r.cfg.Store.TaskRuns(ctx, t.ID, 1); err == nil && len(runs) > 0 {
			last := runs[0]
			fmt.Fprintf(&b, "\n   last run %s: %s", last.Started.In(r.cfg.TZ).Format("2006-01-02 15:04:05"), last.Status)
			if last.Error != "" {
				b.WriteString(" — " + last.Error)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *Router) schedule(ctx context.Context, cmd command.Command) string {
	if len(cmd.Args) < 4 {
		return `Usage: /schedule <folder> <cron|interval|once> <value> <prompt>, e.g. /schedule main cron "0 9 * * *" Good morning summary`
	}
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, cmd.Args[0])
	if err != nil {
		return "Not scheduled: " + err.Error()
	}
	if !ok {
		return fmt.Sprintf("Not scheduled: no group has the folder %s.", cmd.Args[0])
	}
	t, err := ipc.CreateTask(ctx, r.cfg.Store, domain.Task{
		Group: g.Folder, ChatID: g.ChatID, ScheduleType: cmd.Args[1], ScheduleValue: cmd.Args[2],
		Prompt: strings.Join(cmd.Args[3:], " "),
	}, r.cfg.TZ, r.cfg.MinInterval, time.Now())
	if err != nil {
		return "Not scheduled: " + err.Error()
	}
	_ = r.audit(ctx, domain.MainFolder, "schedule_task", "allow", fmt.Sprintf("task %d for %s by the owner", t.ID, g.Folder))
	r.wakeScheduler()
	return "Scheduled " + scheduler.Describe(t, r.cfg.TZ)
}

func (r *Router) taskStatus(ctx context.Context, cmd command.Command) string {
	if len(cmd.Args) != 1 {
		return fmt.Sprintf("Usage: /%s <task id>", cmd.Name)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(cmd.Args[0], "#"), 10, 64)
	if err != nil {
		return fmt.Sprintf("%q is not a task id.", cmd.Args[0])
	}
	t, ok, err := r.cfg.Store.Task(ctx, id)
	if err != nil {
		return "Task unavailable: " + err.Error()
	}
	if !ok {
		return fmt.Sprintf("No task has the id %d.", id)
	}
	op := cmd.Name + "_task"
	if err := ipc.ChangeStatus(ctx, r.cfg.Store, &t, op, r.cfg.TZ, r.cfg.MinInterval, time.Now()); err != nil {
		return "Not changed: " + err.Error()
	}
	_ = r.audit(ctx, domain.MainFolder, op, "allow", fmt.Sprintf("task %d of %s by the owner", t.ID, t.Group))
	r.wakeScheduler()
	return "Done: " + scheduler.Describe(t, r.cfg.TZ)
}

func (r *Router) wakeScheduler() {
	if r.cfg.WakeScheduler != nil {
		r.cfg.WakeScheduler()
	}
}
