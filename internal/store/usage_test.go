package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestUsageAddsPerGroupAndDay(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)

	u, err := s.UsageOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, domain.Usage{Group: "family", Day: "2026-05-04"}, u, "no use yet is zero")

	require.NoError(t, s.AddUsage(ctx, "family", "haiku", "2026-05-04", 100, 20))
	require.NoError(t, s.AddUsage(ctx, "family", "sonnet", "2026-05-04", 50, 5))
	require.NoError(t, s.AddUsage(ctx, "family", "haiku", "2026-05-05", 7, 3))
	require.NoError(t, s.AddUsage(ctx, "main", "sonnet", "2026-05-04", 1, 1))
	require.NoError(t, s.AddUsage(ctx, "main", "sonnet", "2026-05-01", 9, 9))

	u, err = s.UsageOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, domain.Usage{Group: "family", Day: "2026-05-04", Input: 150, Output: 25, Requests: 2}, u)
	assert.Equal(t, int64(175), u.Total())

	all, err := s.UsageSince(ctx, "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, []domain.Usage{
		{Group: "family", Day: "2026-05-04", Input: 150, Output: 25, Requests: 2},
		{Group: "main", Day: "2026-05-04", Input: 1, Output: 1, Requests: 1},
		{Group: "family", Day: "2026-05-05", Input: 7, Output: 3, Requests: 1},
	}, all, "by day then group, from the first day on")

	byModel, err := s.ModelUsageSince(ctx, "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, []domain.Usage{
		{Group: "family", Day: "2026-05-04", Model: "haiku", Input: 100, Output: 20, Requests: 1},
		{Group: "family", Day: "2026-05-04", Model: "sonnet", Input: 50, Output: 5, Requests: 1},
		{Group: "main", Day: "2026-05-04", Model: "sonnet", Input: 1, Output: 1, Requests: 1},
		{Group: "family", Day: "2026-05-05", Model: "haiku", Input: 7, Output: 3, Requests: 1},
	}, byModel, "the same answers, split by model")
}

func TestTranscribedPerGroupAndDay(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	n, err := s.TranscribedOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, s.AddTranscribed(ctx, "family", "2026-05-04", 12))
	require.NoError(t, s.AddTranscribed(ctx, "family", "2026-05-04", 3))
	require.NoError(t, s.AddTranscribed(ctx, "main", "2026-05-05", 60))
	require.Error(t, s.AddTranscribed(ctx, "family", "2026-05-04", -1))
	n, err = s.TranscribedOn(ctx, "family", "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, int64(15), n)
	all, err := s.TranscribedSince(ctx, "2026-05-04")
	require.NoError(t, err)
	assert.Equal(t, []domain.Transcribed{
		{Group: "family", Day: "2026-05-04", Seconds: 15, Files: 2},
		{Group: "main", Day: "2026-05-05", Seconds: 60, Files: 1},
	}, all)
}

func TestAddUsageRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	require.Error(t, s.AddUsage(ctx, "", "m", "2026-05-04", 1, 1))
	require.Error(t, s.AddUsage(ctx, "family", "m", "", 1, 1))
	require.Error(t, s.AddUsage(ctx, "family", "m", "2026-05-04", -1, 1))
	all, err := s.UsageSince(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, all)
}

func TestBudgetNoticeOncePerGroupAndDay(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	out := func(text string) []domain.Outgoing { return []domain.Outgoing{{ChatID: -5, Text: text}} }

	told, err := s.NoteBudgetRefusal(ctx, "family", "2026-05-04", 7, out("first"))
	require.NoError(t, err)
	assert.True(t, told)
	told, err = s.NoteBudgetRefusal(ctx, "family", "2026-05-04", 9, out("second"))
	require.NoError(t, err)
	assert.False(t, told, "told once a day")
	cur, err := s.Cursor(ctx, "family")
	require.NoError(t, err)
	assert.Equal(t, int64(9), cur, "the cursor moves past refused messages even when nobody is told")

	// A restart remembers.
	require.NoError(t, s.Close())
	s, err = Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	told, err = s.NoteBudgetRefusal(ctx, "family", "2026-05-04", 0, out("third"))
	require.NoError(t, err)
	assert.False(t, told)
	told, err = s.NoteBudgetRefusal(ctx, "family", "2026-05-05", 0, out("next day"))
	require.NoError(t, err)
	assert.True(t, told, "a new day tells again")
	told, err = s.NoteBudgetRefusal(ctx, "other", "2026-05-04", 0, out("other group"))
	require.NoError(t, err)
	assert.True(t, told, "per group")
	cur, err = s.Cursor(ctx, "family")
	require.NoError(t, err)
	assert.Equal(t, int64(9), cur, "cursor 0 leaves it")

	pending, err := s.PendingOutbox(ctx)
	require.NoError(t, err)
	var texts []string
	for _, o := range pending {
		texts = append(texts, o.Text)
	}
	assert.Equal(t, []string{"first", "next day", "other group"}, texts)

	_, err = s.NoteBudgetRefusal(ctx, "family", "2026-05-06", 0, []domain.Outgoing{{Text: "no chat"}})
	require.Error(t, err)
}
