package router

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// phish is what an agent (or anything writing its stdout/stderr) would like
// the owner to read.
const phish = `<a href="https://evil.example/login">Re-login</a> [Pay](https://evil.example/pay) @evil_bot /unregister PHISH-MARK`

// The notices name a failure by its class; whatever text the error carries
// never reaches a chat.
func TestNoticesAreTheHostsWords(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		class string
	}{
		{"time limit", fmt.Errorf("agent for %q: %w (10m0s)", "team", runner.ErrTimedOut), "ran past its time limit"},
		{"output limit", fmt.Errorf("agent for %q: %w (%d bytes)", "team", runner.ErrOutputLimit, 1<<20), "output went over the size limit"},
		{"exit code", fmt.Errorf("agent for %q: %w: %s", "team", &runner.ExitError{Code: 3}, phish), "exited with code 3"},
		{"agent error event", fmt.Errorf("agent for %q: %w: %w", "team", runner.ErrAgent, errors.New(phish)), "reported an error or wrote malformed output"},
		{"error event and exit code", fmt.Errorf("agent for %q: %w: %w", "team", runner.ErrAgent, &runner.ExitError{Code: 1}), "reported an error"},
		{"host failure", fmt.Errorf("record the answer of %q: %w", "team", errors.New(phish)), "the host could not run it"},
		{"group gone", fmt.Errorf("task 3: %w", errGroupGone), "its group is not registered"},
		{"no sandbox", fmt.Errorf("run sandbox for %q: %w: %w", "team", runner.ErrNoSandbox, errors.New("bwrap: not found")), "no working sandbox"},
		{"disk quota", fmt.Errorf("run for %q: %w: the group's folder and session use 70.0 MB in 9 entries, over the quota of 64 MB", "team", runner.ErrDiskQuota), "over its disk quota"},
		{"memory limit", fmt.Errorf("agent for %q: %w", "team", &runner.LimitError{Limit: sandbox.MemoryLimit, Max: 64 << 20}), "stopped at its memory limit of 64 MiB"},
		{"process limit", fmt.Errorf("agent for %q: %w", "team", &runner.LimitError{Limit: sandbox.ProcessLimit, Max: 48}), "reached its process limit of 48 processes"},
		{"disk quota reached while running", fmt.Errorf("run sandbox for %q: %w", "team", &runner.LimitError{Limit: sandbox.DiskLimit, Max: 16 << 20,
			Err: fmt.Errorf("%w: the group's folder and session reached 40.0 MB in 3 entries, over the quota of 16 MB", runner.ErrDiskQuota)}), "stopped at its disk quota of 16 MiB"},
	}
	task := domain.Task{ID: 7, Group: "team"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, notice := range []string{ownerRunNotice("team", tc.err), mainRunNotice(tc.err), groupRunNotice(tc.err), ownerTaskNotice(task, tc.err), failure(tc.err)} {
				assert.NotContains(t, notice, "PHISH-MARK")
				assert.NotContains(t, notice, "evil")
				html := markup.ToHTML(notice)
				assert.NotContains(t, html, "<a ", html)
			}
			assert.Contains(t, failure(tc.err), tc.class)
			assert.Contains(t, ownerRunNotice("team", tc.err), "group team")
			assert.Contains(t, ownerRunNotice("team", tc.err), tc.class)
			assert.Contains(t, ownerTaskNotice(task, tc.err), "Task #7 of group team failed: "+failure(tc.err))
			assert.NotContains(t, groupRunNotice(tc.err), "team", "members learn the fact, not the host's details")
		})
	}
	// The owner learns what the host lacks when no sandbox works.
	noSB := fmt.Errorf("run sandbox for %q: %w: %w", "team", runner.ErrNoSandbox, errors.New("bubblewrap: bwrap not found"))
	assert.Contains(t, mainRunNotice(noSB), "bubblewrap")
	assert.NotContains(t, groupRunNotice(noSB), "bubblewrap")
	// And how far over its quota a group is: the host's own measurement.
	quota := fmt.Errorf("run for %q: %w: the group's folder and session use 70.0 MB in 9 entries, over the quota of 64 MB", "team", runner.ErrDiskQuota)
	assert.Contains(t, ownerRunNotice("team", quota), "quota of 64 MB")
	assert.Contains(t, groupRunNotice(quota), "disk quota")
	// A limit the run reached is named to its members too: the host's own
	// setting, as the owner learns it.
	mem := fmt.Errorf("agent for %q: %w", "team", &runner.LimitError{Limit: sandbox.MemoryLimit, Max: 512 << 20})
	assert.Equal(t, "Sorry, I could not answer: it was stopped at its memory limit of 512 MiB. The owner has been told.", groupRunNotice(mem))
	assert.Equal(t, "Sorry, I could not answer: it was stopped at its memory limit of 512 MiB. The details are in the host's log.", mainRunNotice(mem))
}

// /status counts the runs that reached a limit, whatever else failed.
func TestLimitCount(t *testing.T) {
	var c limitCount
	assert.Empty(t, c.words())
	c.note("family", fmt.Errorf("agent: %w", &runner.LimitError{Limit: sandbox.MemoryLimit, Max: 1}))
	c.note("work", fmt.Errorf("agent: %w", runner.ErrTimedOut))
	c.note("main", nil)
	c.note("work", &runner.LimitError{Limit: sandbox.MemoryLimit, Max: 1})
	c.note("main", &runner.LimitError{Limit: sandbox.DiskLimit, Max: 1, Err: runner.ErrDiskQuota})
	assert.Equal(t, "2 at memory (last: work) and 1 at disk (last: main)", c.words())
}

// A task's schedule value and prompt are shown as inert code.
func TestTaskLine(t *testing.T) {
	next := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		task domain.Task
		want string
	}{
		{"interval", domain.Task{ID: 3, Group: "family", ScheduleType: "interval", ScheduleValue: "30m", Status: "active", NextRun: next, Prompt: "water the plants"},
			"#3 family every ` 30m `, next 2026-11-22 09:00 UTC — ` water the plants `"},
		{"cron", domain.Task{ID: 4, Group: "main", ScheduleType: "cron", ScheduleValue: "@daily", Status: "paused", Prompt: "p"},
			"#4 main cron ` @daily `, paused — ` p `"},
		{"once", domain.Task{ID: 5, Group: "x", ScheduleType: "once", ScheduleValue: "2026-11-22T09:00:00Z", Status: "completed", Prompt: "a\nb"},
			"#5 x once, completed — ` a b `"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, taskLine(tc.task, time.UTC))
		})
	}
	html := markup.ToHTML(taskLine(domain.Task{ID: 1, Group: "g", ScheduleType: "interval", ScheduleValue: "1h", Status: "active", Prompt: phish}, time.UTC))
	assert.NotContains(t, html, "<a ")
	assert.Equal(t, 2, strings.Count(html, "<code>"), html)
	assert.Contains(t, html, "<code>&lt;a href=", "the prompt is shown escaped, inside code")
}
