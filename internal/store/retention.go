package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Pruned counts the rows one PruneBatch removed, per table.
type Pruned struct {
	Messages, TaskRuns, Audit, Commands int
}

// Total is every row removed.
func (p Pruned) Total() int { return p.Messages + p.TaskRuns + p.Audit + p.Commands }

// prunes are the statements of PruneBatch: each removes at most ?2 rows
// older than ?1, oldest first. A message stays while a run still needs it:
// one after its group's cursor (not yet handled by a successful run) is
// kept whatever its age; a message of a chat no longer registered has no
// run to wait for. The outbox is never pruned: an undelivered answer is
// pending work, not history.
var prunes = []struct {
	table string
	query string
}{
	{"messages", `DELETE FROM messages WHERE seq IN (
		SELECT m.seq FROM messages m
		LEFT JOIN "groups" g ON g.chat_id = m.chat_id
		LEFT JOIN cursors c ON c.folder = g.folder
		WHERE m.time < $1 AND (g.folder IS NULL OR m.seq <= COALESCE(c.seq, 0))
		ORDER BY m.seq LIMIT $2)`},
	{"task_runs", `DELETE FROM task_runs WHERE id IN (
		SELECT id FROM task_runs WHERE started < $1 ORDER BY id LIMIT $2)`},
	{"audit_log", `DELETE FROM audit_log WHERE id IN (
		SELECT id FROM audit_log WHERE time < $1 ORDER BY id LIMIT $2)`},
	{"handled_commands", `DELETE FROM handled_commands WHERE (chat_id, message_id) IN (
		SELECT chat_id, message_id FROM handled_commands WHERE handled_at < $1 LIMIT $2)`},
}

// PruneBatch removes at most limit rows older than before from each of
// the stored messages a run no longer needs, the task-run log, the audit
// log and the handled-command marks. Each table's batch is a transaction
// of its own, short enough that message handling (the same single writer)
// waits for at most one batch; a crash between batches loses nothing but
// rows that were to go anyway.
func (s *Store) PruneBatch(ctx context.Context, before time.Time, limit int) (Pruned, error) {
	var p Pruned
	counts := []*int{&p.Messages, &p.TaskRuns, &p.Audit, &p.Commands}
	for i, q := range prunes {
		res, err := s.w.ExecContext(ctx, q.query, millis(before), limit)
		if err != nil {
			return p, fmt.Errorf("prune %s: %w", q.table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return p, fmt.Errorf("prune %s: %w", q.table, err)
		}
		*counts[i] = int(n)
	}
	return p, nil
}

// Size is the database's size in bytes: in SQLite as its pages count it
// (what the write-ahead log holds beyond them is not counted), in
// PostgreSQL as pg_database_size says (its files, indexes included).
func (s *Store) Size(ctx context.Context) (int64, error) {
	q := `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`
	if s.pg {
		q = `SELECT pg_database_size(current_database())`
	}
	var n int64
	if err := s.r.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}

// OldestPending is the time of the oldest message of folder's chat that
// no successful run has handled yet (after the group's cursor); ok is false
// when there is none. Files of such a message are still needed, whatever
// their age.
func (s *Store) OldestPending(ctx context.Context, folder string) (at time.Time, ok bool, err error) {
	var ms sql.NullInt64
	err = s.r.QueryRowContext(ctx, `SELECT MIN(m.time) FROM messages m
		JOIN "groups" g ON g.chat_id = m.chat_id
		LEFT JOIN cursors c ON c.folder = g.folder
		WHERE g.folder = $1 AND m.seq > COALESCE(c.seq, 0)`, folder).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest pending message of %q: %w", folder, err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64).UTC(), true, nil
}
