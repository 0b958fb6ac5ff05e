package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// UpsertChat records a chat the bot has seen. An existing row gets the new
// title and type (unless they are empty, so a sparse update does not erase
// them) and last_seen; a zero LastSeen means now.
func (s *Store) UpsertChat(ctx context.Context, c domain.Chat) error {
	if c.ID == 0 {
		return errors.New("upsert chat: zero chat id")
	}
	seen := c.LastSeen
	if seen.IsZero() {
		seen = time.Now()
	}
	_, err := s.w.ExecContext(ctx, `
		INSERT INTO chats (id, title, type, last_seen) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET
			title = CASE WHEN excluded.title <> '' THEN excluded.title ELSE chats.title END,
			type = CASE WHEN excluded.type <> '' THEN excluded.type ELSE chats.type END,
			last_seen = excluded.last_seen`,
		c.ID, c.Title, c.Type, millis(seen))
	if err != nil {
		return fmt.Errorf("upsert chat %d: %w", c.ID, err)
	}
	return nil
}

// ListChats returns every chat seen, most recently seen first.
func (s *Store) ListChats(ctx context.Context) ([]domain.Chat, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT id, title, type, last_seen FROM chats ORDER BY last_seen DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	var out []domain.Chat
	for rows.Next() {
		var c domain.Chat
		if err := rows.Scan(&c.ID, &c.Title, &c.Type, timeCol{&c.LastSeen}); err != nil {
			return nil, fmt.Errorf("list chats: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	return out, nil
}

// AddMessage stores m and returns its seq. It is idempotent on
// (ChatID, MessageID): storing a message again (a redelivered Telegram
// update) returns the existing seq and inserted=false. m.Seq is ignored.
func (s *Store) AddMessage(ctx context.Context, m domain.Message) (seq int64, inserted bool, err error) {
	if m.ChatID == 0 {
		return 0, false, errors.New("add message: zero chat id")
	}
	err = s.w.QueryRowContext(ctx, `
		INSERT INTO messages (chat_id, message_id, thread_id, sender_id, sender_name, text, time, triggered, attachment, "fetch")
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (chat_id, message_id) DO NOTHING RETURNING seq`,
		m.ChatID, m.MessageID, m.ThreadID, m.SenderID, m.SenderName, m.Text, millis(m.Time), boolInt(m.Triggered), attachmentCol{&m.Attachment}, m.FileToFetch).Scan(&seq)
	if err == nil {
		return seq, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) { // no row: the message was there
		return 0, false, fmt.Errorf("add message %d/%d: %w", m.ChatID, m.MessageID, err)
	}
	// Messages are never deleted, so the row that won the conflict is still there.
	err = s.w.QueryRowContext(ctx,
		`SELECT seq FROM messages WHERE chat_id = $1 AND message_id = $2`, m.ChatID, m.MessageID).Scan(&seq)
	if err != nil {
		return 0, false, fmt.Errorf("add message %d/%d: existing seq: %w", m.ChatID, m.MessageID, err)
	}
	return seq, false, nil
}

// MessagesAfter returns up to limit messages of chatID with seq > afterSeq,
// ascending by seq. limit <= 0 means no limit.
func (s *Store) MessagesAfter(ctx context.Context, chatID int64, afterSeq int64, limit int) ([]domain.Message, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT `+messageColumns+` FROM messages WHERE chat_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		chatID, afterSeq, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("messages of chat %d after %d: %w", chatID, afterSeq, err)
	}
	out, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("messages of chat %d after %d: %w", chatID, afterSeq, err)
	}
	return out, nil
}

const messageColumns = `seq, chat_id, message_id, thread_id, sender_id, sender_name, text, time, triggered, attachment, "fetch"`

// scanMessages reads rows of messageColumns and closes them.
func scanMessages(rows *sql.Rows) ([]domain.Message, error) {
	defer rows.Close()
	var out []domain.Message
	for rows.Next() {
		var m domain.Message
		if err := rows.Scan(&m.Seq, &m.ChatID, &m.MessageID, &m.ThreadID, &m.SenderID,
			&m.SenderName, &m.Text, timeCol{&m.Time}, &m.Triggered, attachmentCol{&m.Attachment}, &m.FileToFetch); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MessagesToFetch returns every message whose file is still to be fetched,
// ascending by seq: what a restart must fetch.
func (s *Store) MessagesToFetch(ctx context.Context) ([]domain.Message, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE "fetch" != '' ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("messages with a file to fetch: %w", err)
	}
	out, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("messages with a file to fetch: %w", err)
	}
	return out, nil
}

// SetFetched records what became of the file of message seq (fetched, or
// a note why not): it is no longer to be fetched.
func (s *Store) SetFetched(ctx context.Context, seq int64, a *domain.Attachment) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE messages SET attachment = $1, "fetch" = '' WHERE seq = $2`, attachmentCol{&a}, seq); err != nil {
		return fmt.Errorf("record the file of message %d: %w", seq, err)
	}
	return nil
}

// CountMessages returns how many messages of chatID are stored.
func (s *Store) CountMessages(ctx context.Context, chatID int64) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM messages WHERE chat_id = $1`, chatID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count messages of chat %d: %w", chatID, err)
	}
	return n, nil
}

// ClaimCommand records that the command carried by message (chatID,
// messageID) is being handled and reports whether this is the first time.
// It commits before the command runs: a crash in between loses the command
// (its confirmation never arrives, and the owner sends it again) rather than
// running /schedule or /register twice.
func (s *Store) ClaimCommand(ctx context.Context, chatID, messageID int64) (first bool, err error) {
	res, err := s.w.ExecContext(ctx, `
		INSERT INTO handled_commands (chat_id, message_id, handled_at) VALUES ($1, $2, $3)
		ON CONFLICT (chat_id, message_id) DO NOTHING`, chatID, messageID, millis(time.Now()))
	if err != nil {
		return false, fmt.Errorf("claim command %d/%d: %w", chatID, messageID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim command %d/%d: %w", chatID, messageID, err)
	}
	return n == 1, nil
}
