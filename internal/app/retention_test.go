package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/beneath"
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

// Old files go from each group's inbox, but not those of a message no run
// has handled yet: the message stays whatever its age, and so do its files.
func TestPruneInboxesKeepsWhatARunNeeds(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	defer st.Close()
	groups := t.TempDir()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	old := now.AddDate(0, 0, -100)
	file := func(folder string, at time.Time, id int) string {
		p := filepath.Join(groups, folder, "inbox", fmt.Sprintf("%s-%d.jpg", at.Format("20060102-150405"), id))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		return p
	}
	for i, f := range []string{"family", "quiet"} {
		require.NoError(t, st.PutGroup(ctx, domain.Group{ChatID: int64(-1 - i), Name: f, Folder: f}))
	}
	add := func(chat int64, id int, at time.Time) int64 {
		seq, _, err := st.AddMessage(ctx, domain.Message{ChatID: chat, MessageID: int64(id), SenderID: 7, Text: "m", Time: at})
		require.NoError(t, err)
		return seq
	}
	answered := file("family", old, 1)
	seq := add(-1, 1, old)
	_, err = st.CompleteRun(ctx, "family", seq, nil)
	require.NoError(t, err)
	pendingOld := file("family", old.Add(time.Hour), 2)
	add(-1, 2, old.Add(time.Hour)) // old, but no run has handled it
	quiet := file("quiet", old, 1)
	add(-2, 1, old) // a group that never ran

	n := pruneInboxes(ctx, st, groups, beneath.User{}, now.AddDate(0, 0, -90), slog.New(slog.DiscardHandler))
	assert.Equal(t, 1, n)
	assert.NoFileExists(t, answered)
	assert.FileExists(t, pendingOld)
	assert.FileExists(t, quiet)
}
