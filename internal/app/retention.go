package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/retry"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/store"
)

// Pruning (CLAWPEN_RETENTION) runs at start and then every pruneEvery, in
// batches of pruneBatch rows per table with a pause between them: message
// handling shares the store's single writer, so it waits for at most one
// short batch, never for a whole prune.
const (
	pruneEvery = time.Hour
	pruneBatch = 500
	pruneBreak = 50 * time.Millisecond
)

// pruneLoop prunes what is older than the retention until ctx is done: the
// stored history, and the files users sent into each group's inbox.
func (h *Host) pruneLoop(ctx context.Context) {
	for {
		before := time.Now().Add(-h.retention)
		p, err := pruneOnce(ctx, h.store, before, pruneBatch, pruneBreak)
		if err != nil && ctx.Err() == nil {
			h.log.Error("prune old history", "err", err)
		}
		files := pruneInboxes(ctx, h.store, h.groupsDir, h.sandboxUser, before, h.log)
		if p.Total() > 0 || files > 0 {
			h.log.Info("pruned old history", "messages", p.Messages, "task_runs", p.TaskRuns, "audit", p.Audit, "commands", p.Commands,
				"inbox_files", files)
		}
		if retry.Sleep(ctx, pruneEvery) != nil {
			return
		}
	}
}

// pruneInboxes removes the inbox files of every registered group fetched
// before before (and before the group's oldest message no run has handled
// yet), with the sandbox user's rights (u), and returns how many it
// removed. A group whose inbox cannot be pruned safely (a symlink in its
// path) keeps it, with a warning.
func pruneInboxes(ctx context.Context, st *store.Store, groupsDir string, u beneath.User, before time.Time, log *slog.Logger) int {
	groups, err := st.ListGroups(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("prune inboxes: list groups", "err", err)
		}
		return 0
	}
	total := 0
	for _, g := range groups {
		// The files of a message no run has handled yet stay, whatever
		// their age, as the message itself does (names are whole seconds).
		cutoff := before
		pending, ok, err := st.OldestPending(ctx, g.Folder)
		if err != nil {
			log.Warn("inbox not pruned", "group", g.Folder, "err", err)
			continue
		}
		if ok && pending.Truncate(time.Second).Before(cutoff) {
			cutoff = pending.Truncate(time.Second)
		}
		n, err := router.PruneInbox(u, filepath.Join(groupsDir, g.Folder), cutoff)
		total += n
		if err != nil {
			log.Warn("inbox not pruned", "group", g.Folder, "err", err)
		}
	}
	return total
}

// pruneOnce removes, batch by batch, every row PruneBatch would remove
// older than before, and returns how many it removed.
func pruneOnce(ctx context.Context, st *store.Store, before time.Time, batch int, pause time.Duration) (store.Pruned, error) {
	var total store.Pruned
	for {
		p, err := st.PruneBatch(ctx, before, batch)
		total.Messages += p.Messages
		total.TaskRuns += p.TaskRuns
		total.Audit += p.Audit
		total.Commands += p.Commands
		if err != nil {
			return total, err
		}
		if max(p.Messages, p.TaskRuns, p.Audit, p.Commands) < batch {
			return total, nil // every table had fewer left than a batch
		}
		if err := retry.Sleep(ctx, pause); err != nil {
			return total, err
		}
	}
}
