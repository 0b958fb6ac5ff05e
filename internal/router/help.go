package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// commandExamples gives every admin command one example for /help; a test
// keeps it complete.
var commandExamples = map[string]string{
	"groups":     "/groups",
	"register":   "/register -1001234567890 family Family chat",
	"unregister": "/unregister family",
	"tasks":      "/tasks family",
	"schedule":   `/schedule main cron "0 9 * * *" Good morning: today's calendar`,
	"pause":      "/pause 3",
	"resume":     "/resume 3",
	"cancel":     "/cancel 3",
	"profile":    "/profile family research",
	"new":        "/new family",
	"status":     "/status",
	"usage":      "/usage 30",
	"audit":      "/audit 20",
	"tools":      "/tools",
	"revoke":     "/revoke family example.org",
	"help":       "/help",
}

func (r *Router) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "I am %s. Here, every message goes to me. In a registered group, members call me with @%s, a mention or a reply.\n\nCommands:\n", r.cfg.AssistantName, r.cfg.AssistantName)
	for _, c := range Commands {
		fmt.Fprintf(&b, "/%s %s\n", c.Name, c.Description)
		if ex := commandExamples[c.Name]; ex != "" {
			fmt.Fprintf(&b, "   e.g. %s\n", ex)
		}
	}
	return b.String()
}

// isAdminCommand reports whether text is one of the owner's commands
// addressed to this bot (or to no bot), or a command to it that cannot be
// read: in a group such a message is dropped, neither kept as context nor
// calling the agent, so a member learns nothing of the admin commands.
func (r *Router) isAdminCommand(text string) bool {
	cmd, err := parseCommand(text, r.cfg.BotUsername)
	switch {
	case errors.Is(err, errNotCommand):
		return false
	case err != nil:
		return true
	}
	switch cmd.Name {
	case "start", "pair":
		return true
	}
	for _, c := range Commands {
		if c.Name == cmd.Name {
			return true
		}
	}
	return false
}

// showMenu registers the command menu for the owner's chat, the private
// chat whose id is the owner's user id; before pairing, for no chat.
// Failures are logged: the commands work without a menu.
func (r *Router) showMenu(ctx context.Context, owner int64) {
	if r.cfg.Menu == nil {
		return
	}
	if err := r.cfg.Menu(ctx, owner); err != nil {
		r.log.Warn("set the command menu", "err", err)
	}
}
