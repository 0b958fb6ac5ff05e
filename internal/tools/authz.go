package tools

import (
	"fmt"
	"slices"

	"github.com/clawpen/clawpen/internal/domain"
)

// Decision is a verdict on one call; Reason follows "denied: " when it
// refuses.
type Decision struct {
	Allow  bool
	Reason string
}

// Authorize decides whether c may call t, the group's sandbox profile
// being prof (DESIGN.md's authorization table, "host bridge tools"): the
// tool's groups must name the caller's group (main by default, or all),
// and for a group other than main its profile's tools must list the tool
// too. The owner acts as main. It does no I/O.
func Authorize(c domain.Caller, t *Tool, prof domain.Profile) Decision {
	if t == nil {
		return Decision{Reason: "no such bridge tool"}
	}
	isMain := c.Owner || c.IsMain
	group := c.Group
	if isMain {
		group = domain.MainFolder
	}
	if !t.Groups.All && !slices.Contains(t.Groups.Folders, group) {
		return Decision{Reason: fmt.Sprintf("tool %q is not for group %q (its groups: %s)", t.Name, group, t.Groups)}
	}
	if isMain {
		return Decision{Allow: true, Reason: "main, named by the tool"}
	}
	if !slices.Contains(prof.Tools, t.Name) {
		return Decision{Reason: fmt.Sprintf("profile %q of group %q does not list tool %q", prof.Name, group, t.Name)}
	}
	return Decision{Allow: true, Reason: "named by the tool and listed by the group's profile"}
}
