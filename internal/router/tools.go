package router

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// toolsText answers /tools: each bridge tool, who may call it now, its
// last failure, and the definitions skipped with why.
func (r *Router) toolsText(ctx context.Context) string {
	views, problems, err := r.cfg.Ops.Tools(ctx)
	if err != nil {
		return "Tools unavailable: " + err.Error()
	}
	var b strings.Builder
	if len(views) == 0 {
		b.WriteString("No bridge tools.")
	}
	for _, v := range views {
		who := "nobody"
		if len(v.Callers) > 0 {
			who = strings.Join(v.Callers, ", ")
		}
		fmt.Fprintf(&b, "%s — %s\n  groups: %s; callers now: %s; timeout %s\n", v.Tool.Name, v.Tool.Description, v.Tool.Groups, who, v.Tool.Timeout)
		if v.LastErr != nil {
			fmt.Fprintf(&b, "  last error (%s): %s\n", v.LastErr.Time.In(r.cfg.TZ).Format(time.DateTime), v.LastErr.Err)
		}
	}
	for _, p := range problems {
		fmt.Fprintf(&b, "\nSkipped %s", p)
	}
	return strings.TrimSpace(b.String())
}
