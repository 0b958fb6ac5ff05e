package router

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
)

// maxReasonShown bounds a profile problem shown in the chat (a parse error
// of the file names its path, the profile and the field).
const maxReasonShown = 300

// setProfile is /profile <folder> <name>: the check is the service's, the
// same as `clawpen groups profile`.
func (r *Router) setProfile(ctx context.Context, cmd slashCommand) string {
	if len(cmd.Args) != 2 {
		return "Usage: /profile <folder> <name>, e.g. /profile family research. Defined now: " +
			strings.Join(r.cfg.Ops.Profiles().Names(), ", ") + "."
	}
	g, err := r.cfg.Ops.SetGroupProfile(ctx, domain.Owner(), cmd.Args[0], cmd.Args[1])
	if err != nil {
		return "Profile not changed: " + markup.Literal(err.Error(), maxReasonShown)
	}
	return fmt.Sprintf("%s now runs with the profile %s, from its next run.", g.Folder, g.ProfileName())
}

// profileNote is what /groups adds to a group's line: its profile, and
// why it cannot be used when it cannot.
func profileNote(now config.ProfilesNow, g domain.Group) string {
	if _, err := now.Resolve(g.ProfileName()); err != nil {
		return fmt.Sprintf(", profile %s — CANNOT BE USED, nothing runs: %s", g.ProfileName(), markup.Literal(err.Error(), maxReasonShown))
	}
	return ", profile " + g.ProfileName()
}

// profilesStatus is /status's word on the profiles file: what it defines
// or why it cannot be used, and the groups that run nothing for it.
func profilesStatus(now config.ProfilesNow, groups []domain.Group) string {
	var b strings.Builder
	switch {
	case now.Missing():
		fmt.Fprintf(&b, "Profiles: no file at %s; only the built-in default.", now.Path)
	case now.Broken() != nil:
		fmt.Fprintf(&b, "Profiles: the file cannot be used, so only the built-in default runs: %s.", markup.Literal(now.Broken().Error(), maxReasonShown))
	default:
		fmt.Fprintf(&b, "Profiles: %s (%s).", strings.Join(now.Names(), ", "), now.Path)
	}
	bad := now.Unusable(groups)
	if len(bad) == 0 {
		return b.String()
	}
	var parts []string
	for _, g := range groups {
		if _, ok := bad[g.Folder]; !ok {
			continue
		}
		why := "not defined"
		switch {
		case now.Missing():
			why = "no profiles file"
		case now.Broken() != nil:
			why = "the file is broken"
		}
		parts = append(parts, fmt.Sprintf("%s (profile %s: %s)", g.Folder, g.ProfileName(), why))
	}
	who := "these groups run"
	if len(parts) == 1 {
		who = "this group runs"
	}
	fmt.Fprintf(&b, "\nProfile problem, %s nothing: %s. Fix the file, or /profile <folder> default.", who, joinAnd(parts))
	return b.String()
}

// modelsStatus is /status's word on the models the groups run on: a
// profile's "model", else the host's. A group whose profile cannot be used
// runs nothing and is left out (profilesStatus names it).
func modelsStatus(now config.ProfilesNow, groups []domain.Group, hostModel string) string {
	if hostModel == "" || len(groups) == 0 {
		return ""
	}
	byModel := map[string][]string{}
	var order []string
	for _, g := range groups {
		p, err := now.Resolve(g.ProfileName())
		if err != nil {
			continue
		}
		m := hostModel + " (the host's)"
		if p.Model != "" {
			m = p.Model + " (profile " + p.Name + ")"
		}
		if byModel[m] == nil {
			order = append(order, m)
		}
		byModel[m] = append(byModel[m], g.Folder)
	}
	if len(order) == 0 {
		return ""
	}
	slices.Sort(order)
	parts := make([]string, 0, len(order))
	for _, m := range order {
		parts = append(parts, joinAnd(byModel[m])+" on "+m)
	}
	return "Models: " + strings.Join(parts, "; ") + "."
}
