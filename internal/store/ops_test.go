package store

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// A backup taken while another goroutine writes holds every message
// committed before it started, passes its check (SQLite's integrity check,
// pg_restore --list), and restores to a store of its own: the SQLite file
// opens as it is, the dump is restored into an empty database with
// pg_restore, as the CLI tells the operator.
func TestBackupIsConsistentWhileWriting(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := t.Context()
		add := func(id int64) {
			_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: id, SenderID: 7, Text: "m", Time: time.Now()})
			require.NoError(t, err)
		}
		for i := int64(1); i <= 200; i++ {
			add(i)
		}
		var committed atomic.Int64
		committed.Store(200)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for id := int64(201); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: id, SenderID: 7, Text: "m", Time: time.Now()})
				if err != nil {
					t.Error(err)
					return
				}
				committed.Store(id)
			}
		})
		before := committed.Load()
		dst := filepath.Join(t.TempDir(), "backup.db")
		require.NoError(t, s.Backup(ctx, dst))
		close(stop)
		wg.Wait()

		fi, err := os.Stat(dst)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the copy holds chats: private to its owner")
		where := dst
		if db.pg {
			where = db.fresh(t)
			out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+where, dst).CombinedOutput()
			require.NoError(t, err, "pg_restore: %s", out)
		} else {
			require.NoError(t, IntegrityCheck(ctx, dst))
		}
		b, err := db.open(ctx, where)
		require.NoError(t, err)
		defer b.Close()
		msgs, err := b.MessagesAfter(ctx, -1, 0, 0)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, int64(len(msgs)), before, "every message committed before the backup began")
		for i, m := range msgs {
			require.Equal(t, int64(i+1), m.MessageID, "no gap: one moment's copy")
		}
		// The restored database goes on numbering after what it holds.
		seq, inserted, err := b.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: -1, Text: "after the restore"})
		require.NoError(t, err)
		require.True(t, inserted)
		assert.Greater(t, seq, msgs[len(msgs)-1].Seq)
	})
}

// Without pg_dump a PostgreSQL backup is refused, saying what to install,
// and leaves no file behind.
func TestBackupPostgresNeedsPgDump(t *testing.T) {
	s, _ := postgresDB.openTest(t)
	t.Setenv("PATH", t.TempDir())
	dst := filepath.Join(t.TempDir(), "backup.dump")
	err := s.Backup(t.Context(), dst)
	require.ErrorContains(t, err, "pg_dump, which is not installed")
	_, err = os.Stat(dst)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestBackupNeverOverwrites(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		dst := filepath.Join(t.TempDir(), "backup.db")
		require.NoError(t, os.WriteFile(dst, []byte("last week's backup"), 0o600))
		err := s.Backup(t.Context(), dst)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exists")
		got, _ := os.ReadFile(dst)
		assert.Equal(t, "last week's backup", string(got))
	})
}

func TestAuditQueryFilters(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := t.Context()
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		for i, e := range []domain.AuditEntry{
			{Group: "family", Operation: "ipc.send_message", Decision: "deny", Reason: "r1", Time: t0},
			{Group: "work", Operation: "ipc.schedule_task", Decision: "deny", Reason: "r2", Time: t0.Add(time.Hour)},
			{Group: "family", Operation: "mount", Decision: "deny", Reason: "r3", Time: t0.Add(2 * time.Hour)},
			{Operation: "telegram.private", Decision: "deny", Reason: "r4", Time: t0.Add(3 * time.Hour)},
		} {
			require.NoError(t, s.Audit(ctx, e), i)
		}
		reasons := func(f AuditFilter) []string {
			es, err := s.AuditQuery(ctx, f)
			require.NoError(t, err)
			var out []string
			for _, e := range es {
				out = append(out, e.Reason)
			}
			return out
		}
		for _, tc := range []struct {
			name string
			f    AuditFilter
			want []string
		}{
			{"all, newest first", AuditFilter{}, []string{"r4", "r3", "r2", "r1"}},
			{"one group", AuditFilter{Group: "family"}, []string{"r3", "r1"}},
			{"since", AuditFilter{Since: t0.Add(90 * time.Minute)}, []string{"r4", "r3"}},
			{"group and since", AuditFilter{Group: "family", Since: t0.Add(time.Minute)}, []string{"r3"}},
			{"limit", AuditFilter{Limit: 2}, []string{"r4", "r3"}},
			{"no such group", AuditFilter{Group: "nobody"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, reasons(tc.f)) })
		}
	})
}

func TestOutboxStatsAndWritable(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := t.Context()
		n, oldest, err := s.OutboxStats(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.True(t, oldest.IsZero())
		t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		_, err = s.Enqueue(ctx, []domain.Outgoing{{ChatID: 1, Text: "a", Created: t0}, {ChatID: 2, Text: "b", Created: t0.Add(time.Second)}})
		require.NoError(t, err)
		n, oldest, err = s.OutboxStats(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.True(t, t0.Equal(oldest), "%v != %v", t0, oldest)

		require.NoError(t, s.Writable(ctx))
		require.NoError(t, s.Close())
		assert.Error(t, s.Writable(ctx), "a closed store is not writable")
	})
}
