package router

import (
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/scheduler"
)

// Everything in this file writes text for chats. Nothing a sandbox supplies
// (an agent's error text, its stderr, a task's output) is ever part of it:
// a failure is named by its class, in the host's own words, and the
// details go to the host's log. Untrusted strings a chat may see (chat
// titles, group names, task prompts and schedules) go through
// markup.Literal, which shows them as inert code that Telegram never turns
// into links, mentions or commands.

// Bounds on the untrusted strings shown in host messages.
const (
	maxTitleShown = 128 // Telegram's own limit for a chat title
	maxValueShown = 80  // a schedule value
)

// errGroupGone is a task whose group is no longer registered.
var errGroupGone = errors.New("its group is not registered")

// failure names why a run failed, in the host's words.
func failure(err error) string {
	var exit *runner.ExitError
	var limit *runner.LimitError
	switch {
	case errors.As(err, &limit):
		return limitWords(limit)
	case errors.Is(err, runner.ErrNoSandbox):
		return "the host has no working sandbox, so nothing ran"
	case errors.Is(err, runner.ErrDiskQuota):
		return "the group's files are over its disk quota"
	case errors.Is(err, runner.ErrProfile):
		return "the group's sandbox profile cannot be used, so nothing ran"
	case errors.Is(err, runner.ErrBudget):
		return "the group's daily token budget is used up"
	case errors.Is(err, runner.ErrTimedOut):
		return "it ran past its time limit"
	case errors.Is(err, runner.ErrOutputLimit):
		return "its output went over the size limit"
	case errors.Is(err, runner.ErrAgent):
		return "the agent reported an error or wrote malformed output"
	case errors.As(err, &exit):
		return fmt.Sprintf("it exited with code %d", exit.Code)
	case errors.Is(err, errGroupGone):
		return errGroupGone.Error()
	default:
		return "the host could not run it"
	}
}

// limitWords names the limit a run reached, with its size: the host's own
// setting, never the sandbox's words.
func limitWords(l *runner.LimitError) string {
	switch l.Limit {
	case sandbox.MemoryLimit:
		return "it was stopped at its memory limit of " + size(l.Max)
	case sandbox.ProcessLimit:
		return fmt.Sprintf("it reached its process limit of %d processes", l.Max)
	default:
		return "it was stopped at its disk quota of " + size(l.Max)
	}
}

// ownerRunNotice tells the owner that a group's messages went unanswered.
func ownerRunNotice(folder string, err error) string {
	return fmt.Sprintf("The agent of group %s failed after retries: %s%s. Its members were told that it failed; the details are in the host's log.",
		folder, failure(err), hostDetail(err))
}

// mainRunNotice answers the owner's own messages when main's run failed.
func mainRunNotice(err error) string {
	return fmt.Sprintf("Sorry, I could not answer: %s%s. The details are in the host's log.", failure(err), hostDetail(err))
}

// hostDetail is the error of a run that never started for want of a
// sandbox: the host's own diagnosis (which backend is missing and why), for
// the owner to act on. No sandbox ran, so no part of it is a sandbox's.
func hostDetail(err error) string {
	// Both are the host's own measurements and diagnoses, never a sandbox's text.
	if !errors.Is(err, runner.ErrNoSandbox) && !errors.Is(err, runner.ErrDiskQuota) && !errors.Is(err, runner.ErrProfile) {
		return ""
	}
	return " (" + markup.Literal(err.Error(), 300) + ")"
}

// groupRunNotice answers a non-main group's members: the fact only, host
// details stay with the owner.
func groupRunNotice(err error) string {
	var limit *runner.LimitError
	switch {
	case errors.As(err, &limit):
		return "Sorry, I could not answer: " + limitWords(limit) + ". The owner has been told."
	case errors.Is(err, runner.ErrNoSandbox):
		return "Sorry, I cannot run right now: the host has no working sandbox, and I never run without one. The owner has been told."
	case errors.Is(err, runner.ErrDiskQuota):
		return "Sorry, I could not answer: this group's files are over their disk quota, and nothing runs until space is freed. The owner has been told."
	case errors.Is(err, runner.ErrProfile):
		return "Sorry, I cannot run: this group's sandbox profile is missing or broken, and I never run with other rights than it gives. The owner has been told."
	}
	return "Sorry, I could not answer this time. The owner has been told."
}

// ownerTaskNotice tells the owner that a scheduled task failed.
func ownerTaskNotice(t domain.Task, err error) string {
	return fmt.Sprintf("Task #%d of group %s failed: %s%s. The details are in the host's log.", t.ID, t.Group, failure(err), hostDetail(err))
}

// taskLine is a one-line summary of t for a chat, e.g.
// "#3 family every `30m`, next 2026-11-22 09:00 CET — `water the plants`".
func taskLine(t domain.Task, loc *time.Location) string {
	kind, value := scheduler.ScheduleWords(t)
	if value != "" {
		kind += " " + markup.Literal(value, maxValueShown)
	}
	return fmt.Sprintf("#%d %s %s, %s — %s", t.ID, t.Group, kind, scheduler.When(t, loc), markup.Literal(t.Prompt, scheduler.PromptPreview))
}
