package router

import (
	"context"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// The per-sender rate (DESIGN.md, "Groups"): in a group other than main,
// one member may call the agent at most so many times an hour; calls over
// it are stored as context and not answered, and the group is told once an
// hour per member, in the host's words. Calls are the member's triggered
// messages, counted in the store by the time Telegram gave them.

// rateWindow is the span a rate counts over.
const rateWindow = time.Hour

// senderRate is g's rate of calls per member and hour: its sender
// policy's, else the host's (0: no limit). A malformed policy keeps the
// host's, as only the owner calls the agent under it anyway.
func (r *Router) senderRate(g domain.Group) int {
	if p, err := domain.ParseSenderPolicy(g.Policy, r.cfg.DefaultPolicy); err == nil && p.RateSet {
		return p.Rate
	}
	if r.cfg.DefaultPolicy.RateSet {
		return r.cfg.DefaultPolicy.Rate
	}
	return r.cfg.SenderRate
}

// overRate reports whether in, a call of the agent by a member of g, is
// past the member's rate; if so it tells the group, at most once an hour
// per member. The owner is held to no rate.
func (r *Router) overRate(ctx context.Context, g domain.Group, in domain.Inbound) (bool, error) {
	rate := r.senderRate(g)
	if rate <= 0 {
		return false, nil
	}
	if owner, err := r.Owner(ctx); err != nil || in.SenderID == owner {
		return false, err
	}
	calls, err := r.cfg.Store.SenderCalls(ctx, in.ChatID, in.SenderID, in.Time.Add(-rateWindow))
	if err != nil || calls < rate {
		return false, err
	}
	tell, err := r.cfg.Store.ClaimRateNotice(ctx, in.ChatID, in.SenderID, in.Time, in.Time.Add(-rateWindow))
	if err != nil || !tell {
		return true, err
	}
	_ = r.audit(ctx, g.Folder, "rate", "deny", fmt.Sprintf("user %d reached %d calls in an hour, the group's rate; later calls are kept as context, not answered", in.SenderID, rate))
	text := fmt.Sprintf("One member here has called me %d times within the hour, the most one member may. "+
		"I keep their messages as context and answer their calls again when the hour has passed; everyone else I answer as usual.", rate)
	return true, r.reply(ctx, in.ChatID, in.ThreadID, text)
}
