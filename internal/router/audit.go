package router

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/store"
)

// Bounds of /audit [n]: the last entries fit a message or two.
const (
	auditDefault = 10
	auditMax     = 50
)

// auditText answers /audit [n]: the n newest entries of the audit log.
func (r *Router) auditText(ctx context.Context, cmd slashCommand) string {
	n := auditDefault
	if len(cmd.Args) > 1 {
		return "Usage: /audit [n]"
	}
	if len(cmd.Args) == 1 {
		v, err := strconv.Atoi(cmd.Args[0])
		if err != nil || v < 1 || v > auditMax {
			return fmt.Sprintf("Usage: /audit [n], n from 1 to %d (the CLI shows more: clawpen audit).", auditMax)
		}
		n = v
	}
	es, err := r.cfg.Store.AuditQuery(ctx, store.AuditFilter{Limit: n})
	if err != nil {
		return "Audit log unavailable: " + err.Error()
	}
	if len(es) == 0 {
		return "The audit log is empty."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Audit log, newest first (%d):\n", len(es))
	for _, e := range es {
		who := e.Group
		if who == "" {
			who = "host"
		}
		// Operation names, targets and reasons can hold what a sandbox
		// asked for (a destination, a tool's name): shown inert.
		target := ""
		if e.Target != "" {
			target = " " + markup.Literal(e.Target, maxValueShown)
		}
		fmt.Fprintf(&b, "\n%s %s %s%s %s: %s\n", e.Time.In(r.cfg.TZ).Format("01-02 15:04"), who,
			inertName(e.Operation), target, e.Decision, markup.Literal(e.Reason, maxReasonShown))
	}
	return b.String()
}

// plainName is an operation name the host made (lower-case words, dots,
// dashes): shown as it is; anything else as an inert literal.
var plainName = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

func inertName(s string) string {
	if plainName.MatchString(s) {
		return s
	}
	return markup.Literal(s, maxValueShown)
}
