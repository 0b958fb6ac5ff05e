package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// EnqueueFile queues a file for a chat: the row (o.Kind and o.FileName set,
// o.Text its caption) and its bytes in one transaction, so a crash leaves
// either both or neither, and delivery sends the row exactly once like any
// other. A delivered row's bytes go with it (ON DELETE CASCADE).
func (s *Store) EnqueueFile(ctx context.Context, o domain.Outgoing, data []byte) (domain.Outgoing, error) {
	if o.ChatID == 0 {
		return domain.Outgoing{}, errors.New("enqueue file: zero chat id")
	}
	if o.Kind != domain.OutPhoto && o.Kind != domain.OutDocument {
		return domain.Outgoing{}, fmt.Errorf("enqueue file: unknown kind %q", o.Kind)
	}
	var queued []domain.Outgoing
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		var err error
		if queued, err = insertOutbox(ctx, tx, []domain.Outgoing{o}, time.Now()); err != nil {
			return err
		}
		if data == nil {
			data = []byte{} // NOT NULL: an empty file is still a file
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox_files (outbox_id, data) VALUES ($1, $2)`, queued[0].ID, data); err != nil {
			return fmt.Errorf("outbox file: %w", err)
		}
		return nil
	})
	if err != nil {
		return domain.Outgoing{}, fmt.Errorf("enqueue file: %w", err)
	}
	s.outboxQueued(queued)
	return queued[0], nil
}

// OutboxFile is the bytes of the file of outbox row id.
func (s *Store) OutboxFile(ctx context.Context, id int64) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, `SELECT data FROM outbox_files WHERE outbox_id = $1`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("outbox %d has no file", id)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox file %d: %w", id, err)
	}
	return data, nil
}

// attachmentCol stores a message's attachment as JSON (” for none).
type attachmentCol struct{ dst **domain.Attachment }

// Value is the column's text.
func (c attachmentCol) Value() (driver.Value, error) {
	if *c.dst == nil {
		return "", nil
	}
	b, err := json.Marshal(*c.dst)
	if err != nil {
		return nil, fmt.Errorf("attachment: %w", err)
	}
	return string(b), nil
}

// Scan reads the column's text.
func (c attachmentCol) Scan(v any) error {
	var s string
	switch x := v.(type) {
	case nil:
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		return fmt.Errorf("attachment column holds %T, want text", v)
	}
	*c.dst = nil
	if s == "" {
		return nil
	}
	var a domain.Attachment
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return fmt.Errorf("attachment column: %w", err)
	}
	*c.dst = &a
	return nil
}
