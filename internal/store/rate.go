package store

import (
	"context"
	"fmt"
	"time"
)

// SenderCalls counts the messages of sender in chatID that called the agent
// since the time given.
func (s *Store) SenderCalls(ctx context.Context, chatID, sender int64, since time.Time) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM messages WHERE chat_id = $1 AND sender_id = $2 AND triggered = 1 AND time > $3`,
		chatID, sender, millis(since)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("calls of sender %d in chat %d: %w", sender, chatID, err)
	}
	return n, nil
}

// ClaimRateNotice reports whether sender in chatID is to be told now of
// being over the rate (not told since the time given), and if so records
// now as told: of two messages at once, one claims it.
func (s *Store) ClaimRateNotice(ctx context.Context, chatID, sender int64, now, since time.Time) (bool, error) {
	res, err := s.w.ExecContext(ctx, `
		INSERT INTO rate_notices (chat_id, sender_id, told) VALUES ($1, $2, $3)
		ON CONFLICT (chat_id, sender_id) DO UPDATE SET told = excluded.told WHERE rate_notices.told <= $4`,
		chatID, sender, millis(now), millis(since))
	if err != nil {
		return false, fmt.Errorf("rate notice of sender %d in chat %d: %w", sender, chatID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// SenderCount is how often one member called the agent in a chat.
type SenderCount struct {
	ChatID, Sender int64
	Calls          int
	First          time.Time // the oldest of those calls
}

// BusySenders lists the members with at least min calls since the time
// given, per chat.
func (s *Store) BusySenders(ctx context.Context, since time.Time, min int) ([]SenderCount, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT chat_id, sender_id, COUNT(*), MIN(time) FROM messages
		WHERE triggered = 1 AND time > $1 GROUP BY chat_id, sender_id HAVING COUNT(*) >= $2 ORDER BY chat_id, sender_id`,
		millis(since), min)
	if err != nil {
		return nil, fmt.Errorf("busy senders: %w", err)
	}
	defer rows.Close()
	var out []SenderCount
	for rows.Next() {
		var c SenderCount
		if err := rows.Scan(&c.ChatID, &c.Sender, &c.Calls, timeCol{&c.First}); err != nil {
			return nil, fmt.Errorf("busy senders: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
