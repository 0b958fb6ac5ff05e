package ops

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestUsageText(t *testing.T) {
	ctx := context.Background()
	svc, st := setup(t)
	g, ok, err := st.GroupByFolder(ctx, "family")
	require.NoError(t, err)
	require.True(t, ok)
	g.Profile = "small"
	require.NoError(t, st.PutGroup(ctx, g))
	w, _, err := st.GroupByFolder(ctx, "work")
	require.NoError(t, err)
	w.Profile = "gone"
	require.NoError(t, st.PutGroup(ctx, w))

	for _, u := range []domain.Usage{
		{Group: "family", Day: "2026-11-20", Input: 400, Output: 100},
		{Group: "family", Day: "2026-11-22", Input: 900000, Output: 200000},
		{Group: "main", Day: "2026-11-22", Input: 1234, Output: 5},
		{Group: "main", Day: "2026-11-15", Input: 9, Output: 9},  // before the window
		{Group: "old", Day: "2026-11-21", Input: 10, Output: 1},  // unregistered since
		{Group: "main", Day: "2026-11-23", Input: 77, Output: 7}, // a clock that ran ahead
	} {
		require.NoError(t, st.AddUsage(ctx, u.Group, "claude-test", u.Day, u.Input, u.Output))
	}
	require.NoError(t, st.AddUsage(ctx, "family", "claude-haiku", "2026-11-22", 0, 0))
	require.NoError(t, st.AddTranscribed(ctx, "family", "2026-11-22", 70))
	require.NoError(t, st.AddTranscribed(ctx, "family", "2026-11-22", 5))
	require.NoError(t, st.AddTranscribed(ctx, "work", "2026-11-21", 3605))
	profiles := func(name string) (domain.Profile, error) {
		switch name {
		case "small":
			return domain.Profile{Name: name, DailyTokens: 1000000}, nil
		case "default":
			return domain.Profile{Name: name}, nil
		}
		return domain.Profile{}, errors.New("no such profile")
	}
	now := time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC)
	text, err := svc.UsageText(ctx, 7, now, profiles)
	require.NoError(t, err)
	assert.Equal(t, `Model tokens used the last 7 days (days in UTC; input includes cache reads and writes):

main — no budget (profile default)
  2026-11-22: 1,239 tokens (1,234 in, 5 out; 1 answer) on claude-test

family — budget 1,000,000 tokens a day (profile small)
  2026-11-20: 500 tokens (400 in, 100 out; 1 answer) on claude-test
  2026-11-22: 1,100,000 tokens (900,000 in, 200,000 out; 2 answers) — budget reached
    claude-haiku: 0 tokens (0 in, 0 out; 1 answer)
    claude-test: 1,100,000 tokens (900,000 in, 200,000 out; 1 answer)
  2026-11-22: 1:15 of audio transcribed (2 files)

old — no longer registered
  2026-11-21: 11 tokens (10 in, 1 out; 1 answer) on claude-test

work — profile gone cannot be used, so it runs nothing
  2026-11-21: 1:00:05 of audio transcribed (1 file)

All groups: 1,101,750 tokens, 1:01:20 of audio transcribed.
`, text)

	text, err = svc.UsageText(ctx, 1, now.Add(48*time.Hour), profiles)
	require.NoError(t, err)
	assert.Equal(t, `Model tokens used today (days in UTC; input includes cache reads and writes):

family — budget 1,000,000 tokens a day (profile small)
  no use

All groups: 0 tokens.
`, text, "a group with a budget shows without use")

	_, err = svc.UsageText(ctx, 0, now, profiles)
	require.Error(t, err)
	_, err = svc.UsageText(ctx, MaxUsageDays+1, now, profiles)
	require.Error(t, err)
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 123456: "123,456", 1234567: "1,234,567", -1234: "-1,234"} {
		assert.Equal(t, want, thousands(n))
	}
}
