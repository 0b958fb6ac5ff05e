package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// Cursor returns the seq of the last message handled by a successful run of
// folder's agent, 0 if none.
func (s *Store) Cursor(ctx context.Context, folder string) (int64, error) {
	var seq int64
	err := s.r.QueryRowContext(ctx, `SELECT seq FROM cursors WHERE folder = $1`, folder).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cursor of %q: %w", folder, err)
	}
	return seq, nil
}

// CompleteRun records a successful agent run of folder in one transaction:
// the cursor moves to max(current, cursor) and out is queued in the outbox.
// It returns the queued rows with their IDs (and Created, now if zero).
//
// This is the exactly-once hinge: a crash before it commits re-runs the
// agent on the same messages; a crash after it only re-sends the outbox.
func (s *Store) CompleteRun(ctx context.Context, folder string, cursor int64, out []domain.Outgoing) ([]domain.Outgoing, error) {
	if folder == "" {
		return nil, errors.New("complete run: empty folder")
	}
	for i, o := range out {
		if o.ChatID == 0 {
			return nil, fmt.Errorf("complete run of %q: outgoing %d: zero chat id", folder, i)
		}
	}
	var queued []domain.Outgoing
	now := time.Now()
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, advanceCursor, folder, cursor); err != nil {
			return fmt.Errorf("cursor: %w", err)
		}
		var err error
		queued, err = insertOutbox(ctx, tx, out, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete run of %q: %w", folder, err)
	}
	s.outboxQueued(queued)
	return queued, nil
}

// Enqueue queues host-written messages (command answers, notices) in the outbox.
func (s *Store) Enqueue(ctx context.Context, out []domain.Outgoing) ([]domain.Outgoing, error) {
	for i, o := range out {
		if o.ChatID == 0 {
			return nil, fmt.Errorf("enqueue: outgoing %d: zero chat id", i)
		}
	}
	var queued []domain.Outgoing
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		var err error
		queued, err = insertOutbox(ctx, tx, out, time.Now())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	s.outboxQueued(queued)
	return queued, nil
}

// OutboxQueued receives a value after outbox rows were committed (several
// commits may make one): delivery listens, and reads the outbox again.
func (s *Store) OutboxQueued() <-chan struct{} { return s.queued }

func (s *Store) outboxQueued(rows []domain.Outgoing) {
	if len(rows) == 0 {
		return
	}
	select {
	case s.queued <- struct{}{}:
	default: // one pending wake is enough
	}
}

// advanceCursor moves folder's ($1) cursor to seq ($2), never back.
const advanceCursor = `
	INSERT INTO cursors (folder, seq) VALUES ($1, $2)
	ON CONFLICT (folder) DO UPDATE SET seq = CASE WHEN excluded.seq > cursors.seq THEN excluded.seq ELSE cursors.seq END`

func insertOutbox(ctx context.Context, tx *sql.Tx, out []domain.Outgoing, now time.Time) ([]domain.Outgoing, error) {
	queued := make([]domain.Outgoing, 0, len(out))
	for _, o := range out {
		if o.Created.IsZero() {
			o.Created = now
		}
		// Round as stored, so the returned row equals what PendingOutbox reads.
		o.Created = asStored(o.Created)
		err := tx.QueryRowContext(ctx,
			`INSERT INTO outbox (chat_id, thread_id, text, created, kind, file_name) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
			o.ChatID, o.ThreadID, o.Text, millis(o.Created), o.Kind, o.FileName).Scan(&o.ID)
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		queued = append(queued, o)
	}
	return queued, nil
}

// PendingOutbox returns every undelivered outgoing message, oldest first.
func (s *Store) PendingOutbox(ctx context.Context) ([]domain.Outgoing, error) {
	return s.outbox(ctx, `SELECT id, chat_id, thread_id, text, created, kind, file_name FROM outbox ORDER BY id`)
}

// PendingOutboxOf is chatID's rows of the outbox, oldest first.
func (s *Store) PendingOutboxOf(ctx context.Context, chatID int64) ([]domain.Outgoing, error) {
	return s.outbox(ctx, `SELECT id, chat_id, thread_id, text, created, kind, file_name FROM outbox WHERE chat_id = $1 ORDER BY id`, chatID)
}

func (s *Store) outbox(ctx context.Context, query string, args ...any) ([]domain.Outgoing, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	defer rows.Close()
	var out []domain.Outgoing
	for rows.Next() {
		var o domain.Outgoing
		if err := rows.Scan(&o.ID, &o.ChatID, &o.ThreadID, &o.Text, timeCol{&o.Created}, &o.Kind, &o.FileName); err != nil {
			return nil, fmt.Errorf("pending outbox: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending outbox: %w", err)
	}
	return out, nil
}

// MarkSent removes a delivered message from the outbox. Marking an id that
// is not (or no longer) there is not an error, so a retried delivery is harmless.
func (s *Store) MarkSent(ctx context.Context, id int64) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM outbox WHERE id = $1`, id); err != nil {
		return fmt.Errorf("mark outbox %d sent: %w", id, err)
	}
	return nil
}

// State returns the router state value stored under key.
func (s *Store) State(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM router_state WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("state %q: %w", key, err)
	}
	return v, true, nil
}

// ownerKey is the router state holding the paired owner's user id.
const ownerKey = "owner_id"

// Owner is the owner's Telegram user id: configured (CLAWPEN_OWNER_ID),
// else the one paired and stored; 0 when there is none yet.
func (s *Store) Owner(ctx context.Context, configured int64) (int64, error) {
	if configured != 0 {
		return configured, nil
	}
	v, ok, err := s.State(ctx, ownerKey)
	if err != nil || !ok {
		return 0, err
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored owner id %q: %w", v, err)
	}
	return id, nil
}

// SetOwner stores the owner who paired.
func (s *Store) SetOwner(ctx context.Context, id int64) error {
	return s.SetState(ctx, ownerKey, strconv.FormatInt(id, 10))
}

// SetState stores value under key, replacing any previous value.
func (s *Store) SetState(ctx context.Context, key, value string) error {
	if key == "" {
		return errors.New("set state: empty key")
	}
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO router_state (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value); err != nil {
		return fmt.Errorf("set state %q: %w", key, err)
	}
	return nil
}

// FoldersWithUnanswered lists the folders of registered groups that hold a
// triggered message after their cursor: the groups a restarted host must run.
func (s *Store) FoldersWithUnanswered(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT g.folder FROM "groups" g
		WHERE EXISTS (
			SELECT 1 FROM messages m
			WHERE m.chat_id = g.chat_id AND m.triggered = 1
			  AND m.seq > COALESCE((SELECT c.seq FROM cursors c WHERE c.folder = g.folder), 0))
		ORDER BY g.folder`)
	if err != nil {
		return nil, fmt.Errorf("groups with unanswered messages: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, fmt.Errorf("groups with unanswered messages: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("groups with unanswered messages: %w", err)
	}
	return out, nil
}
