package router

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
)

// A group over its daily token budget is told so once a day; its later
// triggers that day are kept and not answered: the cursor moves past them,
// without a retry and without a second notice (DESIGN.md, "Usage and
// budgets").

func (r *Router) now() time.Time {
	if r.cfg.Now != nil {
		return r.cfg.Now()
	}
	return time.Now()
}

// overBudget records that g's run was refused for its budget: the cursor
// moves to cursor (0: a task's run, no messages), and the chat, and for
// another group the owner in main, are told if they were not yet that day.
func (r *Router) overBudget(ctx context.Context, g domain.Group, cursor int64, runErr error) {
	day, budget := domain.Day(r.now(), r.cfg.TZ), int64(0)
	var be *runner.BudgetError
	if errors.As(runErr, &be) {
		day, budget = be.Day, be.Budget
	}
	out := outgoing(g.ChatID, 0, chatBudgetNotice(g, budget))
	if !g.IsMain() {
		if main, ok, _ := r.cfg.Store.GroupByFolder(ctx, domain.MainFolder); ok {
			out = append(out, outgoing(main.ChatID, 0, ownerBudgetNotice(g, budget, day))...)
		}
	}
	told, err := r.cfg.Store.NoteBudgetRefusal(ctx, g.Folder, day, cursor, out)
	if err != nil {
		r.log.Error("record a run refused for the token budget", "group", g.Folder, "err", err)
		return
	}
	r.log.Info("run refused: daily token budget reached", "group", g.Folder, "day", day, "budget", budget, "told", told)
}

// chatBudgetNotice tells a chat that it is not answered until tomorrow.
func chatBudgetNotice(g domain.Group, budget int64) string {
	if g.IsMain() {
		return fmt.Sprintf("My daily token budget here (%d tokens, set by this chat's profile) is used up, so I answer again tomorrow. "+
			"Until then your messages are not answered; commands still work, and /usage shows the use.", budget)
	}
	return "Sorry, this group's daily token budget is used up, so I answer again tomorrow. " +
		"Until then messages here are not answered. The owner has been told."
}

// ownerBudgetNotice tells the owner that a group reached its budget.
func ownerBudgetNotice(g domain.Group, budget int64, day string) string {
	return fmt.Sprintf("Group %s used its daily token budget of %d tokens (profile %s) on %s: it answers again tomorrow. "+
		"Its chat was told once; messages until then are not answered. /usage shows the use.", g.Folder, budget, g.ProfileName(), day)
}

// usageText answers /usage [days].
func (r *Router) usageText(ctx context.Context, cmd slashCommand) string {
	days := 7
	if len(cmd.Args) > 1 {
		return "Usage: /usage [days] (default 7)"
	}
	if len(cmd.Args) == 1 {
		n, err := strconv.Atoi(cmd.Args[0])
		if err != nil {
			return fmt.Sprintf("%q is not a number of days.", cmd.Args[0])
		}
		days = n
	}
	text, err := r.cfg.Ops.UsageText(ctx, days, r.now(), r.cfg.Profile)
	if err != nil {
		return "Usage unavailable: " + err.Error()
	}
	return text
}
