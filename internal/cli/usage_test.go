package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

func TestUsage(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-100", "family")
	assert.Contains(t, h.ok("usage"), "No group used the model.")

	st, err := store.Open(context.Background(), filepath.Join(h.dir, "data", "clawpen.db"))
	require.NoError(t, err)
	now := time.Now().UTC()
	require.NoError(t, st.AddUsage(context.Background(), "family", "claude-test", domain.Day(now, time.UTC), 1200, 34))
	require.NoError(t, st.AddUsage(context.Background(), "family", "claude-test", domain.Day(now.AddDate(0, 0, -3), time.UTC), 5, 5))
	require.NoError(t, st.Close())

	out := h.ok("usage")
	assert.Contains(t, out, "Model tokens used the last 7 days (days in UTC")
	assert.Contains(t, out, domain.Day(now, time.UTC)+": 1,234 tokens (1,200 in, 34 out; 1 answer)")
	assert.Contains(t, out, "family — no budget (profile default)")
	out = h.ok("usage", "--days", "1")
	assert.Contains(t, out, "All groups: 1,234 tokens.", "the day three days ago is not in today's report")

	code, _, errs := h.run("usage", "--days", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--days must be from 1 to 366")
}
