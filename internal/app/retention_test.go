package app

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

func TestPruneOnceGoesBatchByBatchToTheEnd(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	defer st.Close()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i := range 25 {
		at := now.AddDate(0, 0, -100)
		if i >= 23 {
			at = now // the last two are recent
		}
		require.NoError(t, st.Audit(ctx, domain.AuditEntry{Operation: "mount", Decision: "deny", Time: at}))
	}
	p, err := pruneOnce(ctx, st, now.AddDate(0, 0, -90), 10, 0)
	require.NoError(t, err)
	assert.Equal(t, store.Pruned{Audit: 23}, p, "three batches: 10, 10, 3")
	left, err := st.AuditLog(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, left, 2)
}
