package scheduler

// Task schedules (cron, interval, once) and their due times. This part is
// pure: it never reads the clock; "now" is always a parameter, so every
// result is reproducible in tests.
//
// Semantics, decided here and relied on by the loop (scheduler.go):
//
//   - cron: robfig/cron standard syntax (5 fields, or a descriptor such as
//     @daily), evaluated in the host's time zone. After a run, the next due
//     time is the next occurrence after now: occurrences missed during
//     downtime collapse into the one run that just happened.
//   - interval (and cron "@every"): anchored to the previous due time, so the
//     phase is kept and nothing drifts; missed periods are skipped.
//   - once: a single RFC 3339 instant; after it ran the schedule is done.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/clawpen/clawpen/internal/domain"
)

// MaxInterval is the longest accepted interval: a yearly reminder fits, a
// typo such as "8760000h" does not.
const MaxInterval = 366 * 24 * time.Hour

// minResolution is the smallest interval accepted whatever the configured
// minimum: the store keeps times in milliseconds and robfig's "@every" rounds
// to seconds, so anything finer would be a busy loop in disguise.
const minResolution = time.Second

// ErrPast is returned by First for a "once" time that is not in the future.
var ErrPast = errors.New("time is in the past")

// ErrNever is returned by First for a cron expression with no upcoming
// occurrence (robfig looks five years ahead, e.g. "0 0 31 2 *").
var ErrNever = errors.New("no upcoming occurrence")

// cronParser accepts the standard five fields and descriptors; seconds are
// deliberately not enabled.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed, validated schedule. The zero Schedule is invalid: First
// returns an error and Next reports done.
type Schedule struct {
	Type  string // domain.ScheduleCron, ScheduleInterval or ScheduleOnce
	Value string // the value as parsed, surrounding space trimmed

	loc   *time.Location
	cron  *cron.SpecSchedule // cron expressions and calendar descriptors
	every time.Duration      // interval, and cron "@every"
	at    time.Time          // once
}

// ParseSchedule validates value as a schedule of scheduleType. Cron expressions are
// evaluated in loc (nil: UTC); intervals (and "@every") must be at least
// minInterval.
func ParseSchedule(scheduleType, value string, loc *time.Location, minInterval time.Duration) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	v := strings.TrimSpace(value)
	s := Schedule{Type: scheduleType, Value: v, loc: loc}
	if v == "" {
		return Schedule{}, fmt.Errorf("empty %s schedule", scheduleType)
	}
	switch scheduleType {
	case domain.ScheduleCron:
		return s.parseCron(minInterval)
	case domain.ScheduleInterval:
		d, err := time.ParseDuration(v)
		if err != nil {
			return Schedule{}, fmt.Errorf("interval %q: not a duration such as 30m or 2h", v)
		}
		if err := checkInterval(d, minInterval); err != nil {
			return Schedule{}, fmt.Errorf("interval %q: %w", v, err)
		}
		s.every = d
		return s, nil
	case domain.ScheduleOnce:
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return Schedule{}, fmt.Errorf("once %q: not an RFC 3339 time such as 2026-11-22T09:00:00+01:00", v)
		}
		s.at = at
		return s, nil
	}
	return Schedule{}, fmt.Errorf("unknown schedule type %q: want %s, %s or %s",
		scheduleType, domain.ScheduleCron, domain.ScheduleInterval, domain.ScheduleOnce)
}

func (s Schedule) parseCron(minInterval time.Duration) (Schedule, error) {
	v := s.Value
	// A per-task zone would make "09:00" mean different things in one
	// list; robfig also panics on "TZ=x" without a following space.
	if strings.HasPrefix(v, "TZ=") || strings.HasPrefix(v, "CRON_TZ=") {
		return Schedule{}, fmt.Errorf("cron %q: time zone prefixes are not supported; the host's time zone (TZ, here %s) applies", v, s.loc)
	}
	if !strings.HasPrefix(v, "@") {
		if n := len(strings.Fields(v)); n != 5 {
			return Schedule{}, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), found %d; seconds are not supported", v, n)
		}
	}
	sched, err := cronParser.Parse(v)
	if err != nil {
		return Schedule{}, fmt.Errorf("cron %q: %v", v, err)
	}
	switch c := sched.(type) {
	case *cron.SpecSchedule:
		c.Location = s.loc // the parser defaults to time.Local
		s.cron = c
	case cron.ConstantDelaySchedule:
		if err := checkInterval(c.Delay, minInterval); err != nil {
			return Schedule{}, fmt.Errorf("cron %q: %w", v, err)
		}
		s.every = c.Delay
	default:
		return Schedule{}, fmt.Errorf("cron %q: unsupported schedule kind %T", v, sched)
	}
	return s, nil
}

func checkInterval(d, minInterval time.Duration) error {
	minimum := max(minInterval, minResolution)
	switch {
	case d < minimum:
		return fmt.Errorf("shorter than the minimum of %s", minimum)
	case d > MaxInterval:
		return fmt.Errorf("longer than the maximum of %s (366 days)", MaxInterval)
	}
	return nil
}

// First returns the first due time of a new task created at now: for cron
// the next occurrence after now, for an interval now plus the interval, for
// once the time itself (ErrPast if it is not after now).
func (s Schedule) First(now time.Time) (time.Time, error) {
	switch {
	case s.cron != nil:
		next := s.cron.Next(now)
		if next.IsZero() {
			return time.Time{}, fmt.Errorf("cron %q: %w", s.Value, ErrNever)
		}
		return next, nil
	case s.every > 0:
		return now.Add(s.every), nil
	case s.Type == domain.ScheduleOnce && s.loc != nil:
		if !s.at.After(now) {
			return time.Time{}, fmt.Errorf("once time %s is in the past (now %s): %w",
				s.at.Format(time.RFC3339), now.In(s.loc).Format(time.RFC3339), ErrPast)
		}
		return s.at, nil
	}
	return time.Time{}, errors.New("invalid schedule: not built by Parse")
}

// Next returns the due time following a run that was due at prevDue and
// happened at now. done reports that the schedule has no further run (once,
// or a cron expression without an upcoming occurrence); next is then zero.
func (s Schedule) Next(prevDue, now time.Time) (next time.Time, done bool) {
	switch {
	case s.cron != nil:
		return s.nextCron(prevDue, now)
	case s.every > 0:
		return anchored(prevDue, now, s.every), false
	}
	return time.Time{}, true
}

// nextCron is the next occurrence after both now and prevDue (a clock set
// back must not repeat an occurrence that already ran).
func (s Schedule) nextCron(prevDue, now time.Time) (time.Time, bool) {
	base := now
	if prevDue.After(base) {
		base = prevDue
	}
	next := s.cron.Next(base)
	// robfig yields a fixed wall-clock time twice on the night the clocks
	// fall back (02:30 CEST, then 02:30 CET). Like Vixie cron, a job with a
	// fixed hour runs once; hour wildcards follow real time and keep both.
	if !next.IsZero() && !prevDue.IsZero() && s.cron.Hour&starBit == 0 && sameWallClock(next.In(s.loc), prevDue.In(s.loc)) {
		next = s.cron.Next(next)
	}
	if next.IsZero() {
		return time.Time{}, true
	}
	return next, false
}

// starBit mirrors robfig's marker for a field written as "*".
const starBit = 1 << 63

func sameWallClock(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() && a.Second() == b.Second()
}

// anchored returns prevDue + k*every for the smallest k >= 1 that is after
// now: the phase of the first run is kept and missed periods are skipped.
func anchored(prevDue, now time.Time, every time.Duration) time.Time {
	if prevDue.IsZero() {
		return now.Add(every)
	}
	elapsed := now.Sub(prevDue) // saturates instead of overflowing
	if elapsed < 0 {
		return prevDue.Add(every)
	}
	if elapsed > (1<<63-1)-every {
		// Centuries apart: the anchor is meaningless, restart from now.
		return now.Add(every)
	}
	k := elapsed/every + 1
	return prevDue.Add(k * every)
}
