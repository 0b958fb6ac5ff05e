package router

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
)

// revoke is /revoke <folder> <host>[:port]: a destination the owner
// allowed a group ("Allow for <group>") is asked about again.
func (r *Router) revoke(ctx context.Context, cmd slashCommand) string {
	if len(cmd.Args) != 2 {
		return "Usage: /revoke <folder> <host>[:port], e.g. /revoke family example.org. /status lists what you allowed."
	}
	folder, dest := cmd.Args[0], cmd.Args[1]
	n, err := r.cfg.Ops.RevokeEgress(ctx, domain.Owner(), folder, dest)
	switch {
	case err != nil:
		return "Nothing revoked: " + markup.Literal(err.Error(), maxReasonShown)
	case n == 0:
		return fmt.Sprintf("%s had no allowance for %s; nothing changed.", markup.Literal(folder, 64), markup.Literal(dest, 128))
	}
	return fmt.Sprintf("Revoked: %s is asked about %s again from now on (%s).", folder, markup.Literal(dest, 128), count(n, "allowance", "allowances"))
}

// ownerLoopStatus is what /status says of the owner's own decisions: the
// destinations allowed for groups, and the members over the call rate now.
func (r *Router) ownerLoopStatus(ctx context.Context) string {
	var b strings.Builder
	allowed, err := r.cfg.Ops.EgressAllowed(ctx, "")
	if err != nil {
		return "Allowed destinations unavailable: " + err.Error() + "\n"
	}
	if len(allowed) > 0 {
		byGroup := map[string][]string{}
		for _, a := range allowed {
			byGroup[a.Group] = append(byGroup[a.Group], markup.Literal(a.Host+":"+strconv.Itoa(a.Port), 128))
		}
		var parts []string
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			parts = append(parts, g+": "+strings.Join(byGroup[g], ", "))
		}
		fmt.Fprintf(&b, "Egress you allowed (/revoke to take back): %s.\n", strings.Join(parts, "; "))
	}
	if limited, err := r.limitedSenders(ctx); err != nil {
		fmt.Fprintf(&b, "Sender rates unavailable: %v\n", err)
	} else if len(limited) > 0 {
		fmt.Fprintf(&b, "Over the call rate now: %s.\n", joinAnd(limited))
	}
	return b.String()
}

// limitedSenders are the members of groups who reached their group's call
// rate in the past hour, with when they are answered again.
func (r *Router) limitedSenders(ctx context.Context) ([]string, error) {
	groups, err := r.cfg.Store.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	rates := map[int64]domain.Group{}
	least := 0
	for _, g := range groups {
		if g.IsMain() {
			continue
		}
		if n := r.senderRate(g); n > 0 {
			rates[g.ChatID] = g
			if least == 0 || n < least {
				least = n
			}
		}
	}
	if least == 0 {
		return nil, nil
	}
	now := time.Now()
	busy, err := r.cfg.Store.BusySenders(ctx, now.Add(-time.Hour), least)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range busy {
		g, ok := rates[c.ChatID]
		if !ok || c.Calls < r.senderRate(g) {
			continue
		}
		out = append(out, fmt.Sprintf("user %d in %s (%d calls, answered again from %s)", c.Sender, g.Folder, c.Calls,
			c.First.Add(time.Hour).In(r.cfg.TZ).Format("15:04")))
	}
	return out, nil
}
