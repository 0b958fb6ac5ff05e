package scheduler

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/clawpen/clawpen/internal/domain"
)

// promptPreview is how many characters of a prompt a summary shows.
const promptPreview = 60

// Describe is a one-line human summary of t for /tasks and the CLI, e.g.
// "#3 family every 30m, next 2026-11-22 09:00 CET — 'water the plants'".
// Times are shown in loc (nil: UTC). The prompt is untrusted text: it is
// flattened to one line and shortened, but not escaped for any markup.
func Describe(t domain.Task, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	var sched string
	switch t.ScheduleType {
	case domain.ScheduleInterval:
		sched = "every " + t.ScheduleValue
	case domain.ScheduleCron:
		sched = "cron " + t.ScheduleValue
	case domain.ScheduleOnce:
		sched = "once"
	default:
		sched = t.ScheduleType + " " + t.ScheduleValue
	}
	var when string
	switch {
	case t.Status != domain.TaskActive:
		when = t.Status
	case t.NextRun.IsZero():
		when = "not scheduled"
	default:
		when = "next " + t.NextRun.In(loc).Format("2006-01-02 15:04 MST")
	}
	return fmt.Sprintf("#%d %s %s, %s — '%s'", t.ID, t.Group, oneLine(sched, 80), when, oneLine(t.Prompt, promptPreview))
}

// oneLine collapses whitespace and control characters to single spaces,
// drops format characters (bidi overrides could reorder the line), and cuts
// s to at most n characters, marking a cut with "…".
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
