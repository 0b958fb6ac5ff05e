package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
)

// Describe is a one-line human summary of t for the CLI, e.g.
// "#3 family every 30m, next 2026-11-22 09:00 CET — 'water the plants'".
// Times are shown in loc (nil: UTC). The prompt is untrusted text: it is
// flattened to one line and shortened, but not escaped for any markup (a
// chat message renders the parts itself: ScheduleWords, When).
func Describe(t domain.Task, loc *time.Location) string {
	kind, value := ScheduleWords(t)
	sched := strings.TrimSpace(kind + " " + value)
	return fmt.Sprintf("#%d %s %s, %s — '%s'", t.ID, t.Group, markup.OneLine(sched, 80), When(t, loc), markup.OneLine(t.Prompt, PromptPreview))
}

// PromptPreview is how many characters of a prompt a summary shows.
const PromptPreview = 60

// ScheduleWords names t's schedule: ("every", "30m"), ("cron", "0 9 * * *"),
// ("once", ""). The value is as the task's creator wrote it.
func ScheduleWords(t domain.Task) (kind, value string) {
	switch t.ScheduleType {
	case domain.ScheduleInterval:
		return "every", t.ScheduleValue
	case domain.ScheduleCron:
		return "cron", t.ScheduleValue
	case domain.ScheduleOnce:
		return "once", ""
	default:
		return t.ScheduleType, t.ScheduleValue
	}
}

// When says when t runs next, in loc (nil: UTC): "next 2026-11-22 09:00
// CET", its status when it is not active, or "not scheduled".
func When(t domain.Task, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case t.Status != domain.TaskActive:
		return t.Status
	case t.NextRun.IsZero():
		return "not scheduled"
	default:
		return "next " + t.NextRun.In(loc).Format("2006-01-02 15:04 MST")
	}
}
