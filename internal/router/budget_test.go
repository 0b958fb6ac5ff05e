package router

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
)

// A group over its budget: every trigger that day is refused, the cursor
// moves past it (no retry), and the chat and the owner are told once; the
// next day's refusal tells them again.
func TestBudgetToldOnceADay(t *testing.T) {
	for _, tc := range []struct {
		folder string
		chat   int64
	}{{"family", family}, {domain.MainFolder, owner}} {
		t.Run(tc.folder, func(t *testing.T) {
			f := newFixture(t, "")
			over := func(day string) error {
				return fmt.Errorf("run for %q: %w", tc.folder, &runner.BudgetError{Day: day, Budget: 1000, Used: 1200})
			}
			chatType := "supergroup"
			if tc.chat == owner {
				chatType = "private"
			}
			g, ok, err := f.st.GroupByFolder(t.Context(), tc.folder)
			require.NoError(t, err)
			require.True(t, ok)

			for i, day := range []string{"2026-11-23", "2026-11-23", "2026-11-23", "2026-11-24"} {
				f.agents.err = over(day)
				f.say(t, domain.Inbound{ChatID: tc.chat, ChatType: chatType, SenderID: owner, Text: fmt.Sprintf("@Andy try %d", i)})
				err := f.r.pending(t.Context(), tc.folder)
				require.ErrorIs(t, err, runner.ErrBudget)
				require.True(t, permanent(err), "no retry can help today")
				f.r.giveUp(t.Context(), tc.folder, err)
				msgs := f.stored(t, tc.chat)
				assert.Equal(t, msgs[len(msgs)-1].Seq, f.cursor(t, tc.folder), "the refused trigger is passed, not retried")
			}
			notice := chatBudgetNotice(g, 1000)
			if tc.chat == owner {
				assert.Equal(t, []string{notice, notice}, f.outbox(t, owner), "main is told once a day, and only in its own words")
			} else {
				assert.Equal(t, []string{notice, notice}, f.outbox(t, family), "told once a day")
				assert.Equal(t, []string{ownerBudgetNotice(g, 1000, "2026-11-23"), ownerBudgetNotice(g, 1000, "2026-11-24")}, f.outbox(t, owner))
				assert.Contains(t, f.outbox(t, owner)[0], "Group family used its daily token budget of 1000 tokens (profile default) on 2026-11-23")
			}
			assert.Len(t, f.agents.requests(), 4)
			assert.Empty(t, f.audited(t, "agent.run", "error"), "a budget refusal is not a failure")
		})
	}
}

// A scheduled task of a group over its budget tells the group and the owner
// once a day, like its messages, not once per task.
func TestBudgetTaskToldOnce(t *testing.T) {
	f := newFixture(t, "")
	f.agents.err = &runner.BudgetError{Day: "2026-11-23", Budget: 10, Used: 10}
	task, err := f.st.CreateTask(t.Context(), domain.Task{Group: "family", ChatID: family, ScheduleType: domain.ScheduleInterval, ScheduleValue: "1h",
		Prompt: "p", ContextMode: domain.ContextGroup, Status: domain.TaskActive, NextRun: time.Now()})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, f.r.runTask(t.Context(), task))
	}
	assert.Len(t, f.outbox(t, family), 1)
	assert.Len(t, f.outbox(t, owner), 1)
	runs, err := f.st.TaskRuns(t.Context(), task.ID, 0)
	require.NoError(t, err)
	require.Len(t, runs, 3, "every refused run is logged")
	assert.Equal(t, "the group's daily token budget is used up", runs[0].Error)
}

func TestUsageCommand(t *testing.T) {
	f := newFixture(t, "")
	f.r.cfg.Now = func() time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }
	require.NoError(t, f.st.AddUsage(t.Context(), "family", "claude-test", "2026-11-23", 1500, 250))
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/usage"})
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/usage 0"})
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/usage lots"})
	out := f.outbox(t, owner)
	require.Len(t, out, 3)
	assert.Contains(t, out[0], "Model tokens used the last 7 days")
	assert.Contains(t, out[0], "2026-11-23: 1,750 tokens (1,500 in, 250 out; 1 answer)")
	assert.Contains(t, out[1], "days must be from 1 to 366")
	assert.Contains(t, out[2], `"lots" is not a number of days`)
	assert.Empty(t, f.agents.requests(), "the host answers /usage itself")
}
