package router

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/ops"
)

// Commands lists the owner's admin commands, the command menu of the
// owner's chat (and only of it); help.go has an example of each.
var Commands = []struct{ Name, Description string }{
	{"groups", "list registered groups and chats seen"},
	{"register", "<chat_id> <folder> [name]: register a group"},
	{"unregister", "<folder>: unregister a group"},
	{"tasks", "[folder]: scheduled tasks"},
	{"schedule", "<folder> <cron|interval|once> <value> <prompt>: schedule a task (quote a cron value)"},
	{"pause", "<id>: pause a task"},
	{"resume", "<id>: resume a task"},
	{"cancel", "<id>: cancel a task"},
	{"profile", "<folder> <name>: give a group a sandbox profile (default: none of its own)"},
	{"new", "[folder]: forget a group's conversation (default: main)"},
	{"status", "sandboxes, queues and next due tasks"},
	{"usage", "[days]: model tokens per group and day (default 7 days)"},
	{"audit", "[n]: the newest entries of the audit log (default 10)"},
	{"tools", "host bridge tools: who may call each, last errors"},
	{"revoke", "<folder> <host>[:port]: ask again about a destination you allowed a group"},
	{"help", "what I can do"},
}

// command runs an admin command from the owner in the main chat. It reports
// false for text that is not one of ours, which then goes to the agent.
func (r *Router) command(ctx context.Context, main domain.Group, in domain.Inbound) (bool, error) {
	cmd, err := parseCommand(in.Text, r.cfg.BotUsername)
	if errors.Is(err, errNotCommand) {
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
	case "profile":
		return answer(r.setProfile(ctx, cmd))
	case "new":
		return answer(r.forget(ctx, cmd))
	case "status":
		return answer(r.status(ctx))
	case "usage":
		return answer(r.usageText(ctx, cmd))
	case "audit":
		return answer(r.auditText(ctx, cmd))
	case "tools":
		return answer(r.toolsText(ctx))
	case "revoke":
		return answer(r.revoke(ctx, cmd))
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

func (r *Router) groupsText(ctx context.Context) (string, error) {
	groups, err := r.cfg.Store.ListGroups(ctx)
	if err != nil {
		return "", fmt.Errorf("list groups: %w", err)
	}
	chats, err := r.cfg.Ops.ListChats(ctx, domain.Owner())
	if err != nil {
		return "", fmt.Errorf("list chats: %w", err)
	}
	profiles := r.cfg.Ops.Profiles()
	var b strings.Builder
	b.WriteString("Registered groups:\n")
	for _, g := range groups {
		fmt.Fprintf(&b, "• %s — folder %s, chat %d%s\n", markup.Literal(g.Name, maxTitleShown), g.Folder, g.ChatID, profileNote(profiles, g))
	}
	b.WriteString("\nChats seen, not registered:\n")
	n := 0
	for _, c := range chats {
		if c.Folder != "" || c.Type == "private" {
			continue
		}
		n++
		fmt.Fprintf(&b, "• %s (%s) — chat %d\n", markup.Literal(c.Title, maxTitleShown), markup.OneLine(c.Type, 20), c.ID)
	}
	if n == 0 {
		b.WriteString("none\n")
	}
	return b.String(), nil
}

func (r *Router) register(ctx context.Context, cmd slashCommand) string {
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
	g, err := r.cfg.Ops.RegisterGroup(ctx, domain.Owner(), ops.GroupRequest{ChatID: chatID, Folder: folder, Name: name})
	if err != nil {
		return "Not registered: " + err.Error()
	}
	return fmt.Sprintf("Registered %s (chat %d) with folder groups/%s. Members call me with @%s.", markup.Literal(g.Name, maxTitleShown), g.ChatID, g.Folder, r.cfg.AssistantName)
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

func (r *Router) unregister(ctx context.Context, cmd slashCommand) string {
	if len(cmd.Args) != 1 {
		return "Usage: /unregister <folder>"
	}
	folder := cmd.Args[0]
	if folder == domain.MainFolder {
		return "The main group cannot be unregistered."
	}
	ok, err := r.cfg.Ops.UnregisterGroup(ctx, domain.Owner(), folder)
	if err != nil {
		return "Not unregistered: " + err.Error()
	}
	if !ok {
		return fmt.Sprintf("No group has the folder %s.", folder)
	}
	return fmt.Sprintf("Unregistered %s. Its folder groups/%s is kept.", folder, folder)
}

// forget removes a group's conversation transcript: its next run starts
// with no earlier conversation.
func (r *Router) forget(ctx context.Context, cmd slashCommand) string {
	if len(cmd.Args) > 1 {
		return "Usage: /new [folder] (default: main)"
	}
	folder := domain.MainFolder
	if len(cmd.Args) == 1 {
		folder = cmd.Args[0]
	}
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, folder)
	if err != nil {
		return "Nothing forgotten: " + err.Error()
	}
	if !ok {
		return fmt.Sprintf("Nothing forgotten: no group has the folder %s. /groups lists them.", markup.Literal(folder, maxTitleShown))
	}
	forgot, err := r.cfg.Agents.Forget(g.Folder)
	if err != nil {
		r.log.Error("forget a conversation", "group", g.Folder, "err", err)
		return fmt.Sprintf("Could not forget the conversation of %s; the host's log says why.", g.Folder)
	}
	_ = r.audit(ctx, domain.MainFolder, "new_session", "allow", "conversation of "+g.Folder+" forgotten by the owner")
	if !forgot {
		return fmt.Sprintf("%s has no saved conversation: its next run starts fresh.", g.Folder)
	}
	return fmt.Sprintf("Forgot the conversation of %s: its next run starts fresh. The old conversation is archived in data/transcripts/%s; its files in groups/%s are kept.", g.Folder, g.Folder, g.Folder)
}

func (r *Router) tasksText(ctx context.Context, cmd slashCommand) string {
	folder := ""
	if len(cmd.Args) > 0 {
		folder = cmd.Args[0]
	}
	ts, err := r.cfg.Ops.ListTasks(ctx, domain.Owner(), folder)
	if err != nil {
		return "Tasks unavailable: " + err.Error()
	}
	if len(ts) == 0 {
		return "No tasks."
	}
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(taskLine(t, r.cfg.TZ))
		if runs, err := r.cfg.Store.TaskRuns(ctx, t.ID, 1); err == nil && len(runs) > 0 {
			last := runs[0]
			fmt.Fprintf(&b, "\n   last run %s: %s", last.Started.In(r.cfg.TZ).Format("2006-01-02 15:04:05"), markup.OneLine(last.Status, 20))
			if last.Error != "" {
				// The host's words since a run's error is its class; a row
				// written before that may hold the agent's text.
				b.WriteString(" — " + markup.Literal(last.Error, 200))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *Router) schedule(ctx context.Context, cmd slashCommand) string {
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
	t, err := r.cfg.Ops.ScheduleTask(ctx, domain.Owner(), domain.Task{
		Group: g.Folder, ScheduleType: cmd.Args[1], ScheduleValue: cmd.Args[2], Prompt: strings.Join(cmd.Args[3:], " "),
	})
	if err != nil {
		return "Not scheduled: " + err.Error()
	}
	return "Scheduled " + taskLine(t, r.cfg.TZ)
}

func (r *Router) taskStatus(ctx context.Context, cmd slashCommand) string {
	if len(cmd.Args) != 1 {
		return fmt.Sprintf("Usage: /%s <task id>", cmd.Name)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(cmd.Args[0], "#"), 10, 64)
	if err != nil {
		return fmt.Sprintf("%q is not a task id.", cmd.Args[0])
	}
	op := ops.PauseTask
	switch cmd.Name {
	case "resume":
		op = ops.ResumeTask
	case "cancel":
		op = ops.CancelTask
	}
	t, err := r.cfg.Ops.ChangeTaskStatus(ctx, domain.Owner(), op, id)
	switch {
	case errors.Is(err, ops.ErrNoTask):
		return fmt.Sprintf("No task has the id %d.", id)
	case err != nil:
		return "Not changed: " + err.Error()
	}
	return "Done: " + taskLine(t, r.cfg.TZ)
}
