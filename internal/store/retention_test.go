package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// Retention with an injected "now": old answered messages, old task runs
// and old audit entries go; what a run still needs (after the cursor), the
// outbox, and everything recent stay. Pruning in batches with a restart in
// the middle loses nothing else.
func TestPruneKeepsWhatARunNeeds(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, path := db.openTest(t)
		ctx := t.Context()
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		old, recent := now.AddDate(0, 0, -100), now.AddDate(0, 0, -1)
		retention := 90 * 24 * time.Hour

		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -1, Name: "Family", Folder: "family"}))
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -2, Name: "Quiet", Folder: "quiet"})) // never ran
		add := func(chat, id int64, at time.Time) int64 {
			seq, _, err := s.AddMessage(ctx, domain.Message{ChatID: chat, MessageID: id, SenderID: 7, Text: fmt.Sprint(id), Time: at})
			require.NoError(t, err)
			return seq
		}
		var answered int64
		for id := int64(1); id <= 5; id++ {
			answered = add(-1, id, old) // old, answered below
		}
		add(-1, 6, old)    // old but after the cursor: pending
		add(-1, 7, recent) // recent
		add(-2, 1, old)    // old, its group never ran: pending
		add(-3, 1, old)    // old, of a chat no longer registered
		_, err := s.CompleteRun(ctx, "family", answered, []domain.Outgoing{{ChatID: -1, Text: "undelivered", Created: old}})
		require.NoError(t, err)

		task, err := s.CreateTask(ctx, domain.Task{Group: "family", ChatID: -1, Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h", ContextMode: domain.ContextGroup, Status: domain.TaskActive})
		require.NoError(t, err)
		for _, at := range []time.Time{old, old, recent} {
			_, err := s.AddTaskRun(ctx, domain.TaskRun{TaskID: task.ID, Started: at, Status: "ok"})
			require.NoError(t, err)
		}
		for _, at := range []time.Time{old, recent} {
			require.NoError(t, s.Audit(ctx, domain.AuditEntry{Operation: "mount", Decision: "deny", Reason: at.String(), Time: at}))
		}

		for i, at := range []time.Time{old, recent} {
			_, err := s.w.ExecContext(ctx, `INSERT INTO handled_commands (chat_id, message_id, handled_at) VALUES (42, $1, $2)`, i, millis(at))
			require.NoError(t, err)
		}

		before := now.Add(-retention)
		// One batch of one row per table, then a restart.
		p, err := s.PruneBatch(ctx, before, 1)
		require.NoError(t, err)
		assert.Equal(t, Pruned{Messages: 1, TaskRuns: 1, Audit: 1, Commands: 1}, p)
		require.NoError(t, s.Close())
		s, err = db.open(ctx, path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })

		total := p
		for {
			p, err := s.PruneBatch(ctx, before, 2)
			require.NoError(t, err)
			if p.Total() == 0 {
				break
			}
			total.Messages += p.Messages
			total.TaskRuns += p.TaskRuns
			total.Audit += p.Audit
			total.Commands += p.Commands
		}
		assert.Equal(t, Pruned{Messages: 6, TaskRuns: 2, Audit: 1, Commands: 1}, total, "5 answered + 1 unregistered; 2 runs; 1 entry; 1 mark")
		first, err := s.ClaimCommand(ctx, 42, 1)
		require.NoError(t, err)
		assert.False(t, first, "the recent command mark stays")

		texts := func(chat int64) []string {
			ms, err := s.MessagesAfter(ctx, chat, 0, 0)
			require.NoError(t, err)
			var out []string
			for _, m := range ms {
				out = append(out, m.Text)
			}
			return out
		}
		assert.Equal(t, []string{"6", "7"}, texts(-1), "the pending and the recent message stay")
		assert.Equal(t, []string{"1"}, texts(-2), "a group that never ran keeps what its first run gets")
		assert.Empty(t, texts(-3))
		runs, err := s.TaskRuns(ctx, task.ID, 0)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		assert.True(t, recent.Equal(runs[0].Started))
		audit, err := s.AuditLog(ctx, 0)
		require.NoError(t, err)
		require.Len(t, audit, 1)
		assert.Equal(t, recent.String(), audit[0].Reason)
		out, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		assert.Len(t, out, 1, "the outbox is never pruned")
		cursor, err := s.Cursor(ctx, "family")
		require.NoError(t, err)
		assert.Equal(t, answered, cursor)

		size, err := s.Size(ctx)
		require.NoError(t, err)
		assert.Greater(t, size, int64(4096))
	})
}

// The oldest message a run has not yet handled is what an inbox prune
// must keep the files of: none before a group's first message, the first
// after the cursor once some were answered.
func TestOldestPending(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := t.Context()
		t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -1, Name: "Family", Folder: "family"}))

		_, ok, err := s.OldestPending(ctx, "family")
		require.NoError(t, err)
		assert.False(t, ok, "no message yet")

		var seqs []int64
		for i := range 3 {
			seq, _, err := s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: int64(i + 1), SenderID: 7, Text: "m", Time: t0.Add(time.Duration(i) * time.Hour)})
			require.NoError(t, err)
			seqs = append(seqs, seq)
		}
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -2, MessageID: 1, SenderID: 7, Text: "another chat", Time: t0.Add(-time.Hour)})
		require.NoError(t, err)

		at, ok, err := s.OldestPending(ctx, "family")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, t0, at, "never ran: the first message")

		_, err = s.CompleteRun(ctx, "family", seqs[0], nil)
		require.NoError(t, err)
		at, ok, err = s.OldestPending(ctx, "family")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, t0.Add(time.Hour), at, "the first after the cursor")

		_, err = s.CompleteRun(ctx, "family", seqs[2], nil)
		require.NoError(t, err)
		_, ok, err = s.OldestPending(ctx, "family")
		require.NoError(t, err)
		assert.False(t, ok, "all handled")
	})
}
