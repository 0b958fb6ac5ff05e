package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// ErrBudget marks a run refused because its group used its profile's daily
// token budget: before the sandbox started, or when the model proxy refused
// the agent's call. Retrying cannot help before the next day.
var ErrBudget = errors.New("daily token budget reached")

// BudgetError is a run refused for the budget on Day (errors.Is ErrBudget).
type BudgetError struct {
	Day    string // domain.DayLayout, in TZ
	Budget int64
	Used   int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s: %d of %d tokens used on %s", ErrBudget, e.Used, e.Budget, e.Day)
}

func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

func (r *Runner) now() time.Time {
	if r.cfg.Now != nil {
		return r.cfg.Now()
	}
	return time.Now()
}

// checkBudget refuses a run of g whose profile's budget for today is used,
// before any sandbox starts. A budget whose use cannot be read refuses too.
func (r *Runner) checkBudget(ctx context.Context, g domain.Group, p domain.Profile) error {
	if p.DailyTokens <= 0 {
		return nil
	}
	day := domain.Day(r.now(), r.cfg.TZ)
	if r.cfg.Usage == nil {
		return fmt.Errorf("profile %q sets a daily token budget, but the host keeps no usage", p.Name)
	}
	u, err := r.cfg.Usage.UsageOn(ctx, g.Folder, day)
	if err != nil {
		return fmt.Errorf("check the daily token budget: %w", err)
	}
	if u.Total() < p.DailyTokens {
		return nil
	}
	r.auditBudget(ctx, g.Folder, p.DailyTokens)
	return &BudgetError{Day: day, Budget: p.DailyTokens, Used: u.Total()}
}

// budgetRefusal is the error of a run whose model call the socket refused
// for the budget.
func budgetRefusal(b hostsock.BudgetRefusal) error {
	return &BudgetError{Day: b.Day, Budget: b.Budget, Used: b.Used}
}

func (r *Runner) auditBudget(ctx context.Context, folder string, budget int64) {
	if r.cfg.Audit == nil {
		return
	}
	err := r.cfg.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: folder, Operation: "agent.run", Decision: "deny",
		Reason: hostsock.BudgetReason(budget) + "; no sandbox started"})
	if err != nil {
		r.cfg.Logger.Error("write audit log", "err", err)
	}
}
