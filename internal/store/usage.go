package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// AddUsage adds one answer's tokens, from model, to group's use of day:
// the group's total (what its budget counts) and its use of that model,
// in one transaction.
func (s *Store) AddUsage(ctx context.Context, group, model, day string, input, output int64) error {
	if group == "" || day == "" {
		return fmt.Errorf("add usage: group and day are required (got %q, %q)", group, day)
	}
	if input < 0 || output < 0 {
		return fmt.Errorf("add usage of %q: negative token count (%d, %d)", group, input, output)
	}
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO token_usage (group_folder, day, input_tokens, output_tokens, requests) VALUES (?, ?, ?, ?, 1)
			ON CONFLICT (group_folder, day) DO UPDATE SET
				input_tokens = input_tokens + excluded.input_tokens,
				output_tokens = output_tokens + excluded.output_tokens,
				requests = requests + 1`,
			group, day, input, output); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO model_usage (group_folder, day, model, input_tokens, output_tokens, requests) VALUES (?, ?, ?, ?, ?, 1)
			ON CONFLICT (group_folder, day, model) DO UPDATE SET
				input_tokens = input_tokens + excluded.input_tokens,
				output_tokens = output_tokens + excluded.output_tokens,
				requests = requests + 1`,
			group, day, model, input, output)
		return err
	})
	if err != nil {
		return fmt.Errorf("add usage of %q on %s: %w", group, day, err)
	}
	return nil
}

// UsageOn is group's use of day (zero when it used nothing).
func (s *Store) UsageOn(ctx context.Context, group, day string) (domain.Usage, error) {
	u := domain.Usage{Group: group, Day: day}
	err := s.r.QueryRowContext(ctx, `
		SELECT input_tokens, output_tokens, requests FROM token_usage WHERE group_folder = ? AND day = ?`,
		group, day).Scan(&u.Input, &u.Output, &u.Requests)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return domain.Usage{}, fmt.Errorf("usage of %q on %s: %w", group, day, err)
	}
	return u, nil
}

// UsageSince lists every group's use of each day from day from on, by day
// then group.
func (s *Store) UsageSince(ctx context.Context, from string) ([]domain.Usage, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT group_folder, day, input_tokens, output_tokens, requests FROM token_usage
		WHERE day >= ? ORDER BY day, group_folder`, from)
	if err != nil {
		return nil, fmt.Errorf("usage since %s: %w", from, err)
	}
	defer rows.Close()
	var out []domain.Usage
	for rows.Next() {
		var u domain.Usage
		if err := rows.Scan(&u.Group, &u.Day, &u.Input, &u.Output, &u.Requests); err != nil {
			return nil, fmt.Errorf("usage since %s: %w", from, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage since %s: %w", from, err)
	}
	return out, nil
}

// NoteBudgetRefusal records, in one transaction, that group's run was
// refused on day for its token budget: the cursor moves to cursor (the
// refused messages are not answered later; 0 leaves it) and, only if the
// group was not told yet that day, out is queued and the notice recorded.
// told says whether out was queued. Done at once, a crash can neither lose
// the notice nor send it twice.
func (s *Store) NoteBudgetRefusal(ctx context.Context, group, day string, cursor int64, out []domain.Outgoing) (told bool, err error) {
	if group == "" || day == "" {
		return false, fmt.Errorf("note budget refusal: group and day are required (got %q, %q)", group, day)
	}
	for i, o := range out {
		if o.ChatID == 0 {
			return false, fmt.Errorf("note budget refusal of %q: outgoing %d: zero chat id", group, i)
		}
	}
	var queued []domain.Outgoing
	now := time.Now()
	err = withTx(ctx, s.w, func(tx *sql.Tx) error {
		if cursor > 0 {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO cursors (folder, seq) VALUES (?, ?)
				ON CONFLICT (folder) DO UPDATE SET seq = max(cursors.seq, excluded.seq)`,
				group, cursor); err != nil {
				return fmt.Errorf("cursor: %w", err)
			}
		}
		res, err := tx.ExecContext(ctx, `
			INSERT INTO budget_notices (group_folder, day, told_at) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, group, day, millis(now))
		if err != nil {
			return fmt.Errorf("record notice: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // told before: nothing to queue
		}
		told = true
		queued, err = insertOutbox(ctx, tx, out, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("note budget refusal of %q on %s: %w", group, day, err)
	}
	s.outboxQueued(queued)
	return told, nil
}

// ModelUsageSince lists every group's use of each model on each day from
// day from on, by day, group and model.
func (s *Store) ModelUsageSince(ctx context.Context, from string) ([]domain.Usage, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT group_folder, day, model, input_tokens, output_tokens, requests FROM model_usage
		WHERE day >= ? ORDER BY day, group_folder, model`, from)
	if err != nil {
		return nil, fmt.Errorf("usage by model since %s: %w", from, err)
	}
	defer rows.Close()
	var out []domain.Usage
	for rows.Next() {
		var u domain.Usage
		if err := rows.Scan(&u.Group, &u.Day, &u.Model, &u.Input, &u.Output, &u.Requests); err != nil {
			return nil, fmt.Errorf("usage by model since %s: %w", from, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage by model since %s: %w", from, err)
	}
	return out, nil
}

// AddTranscribed adds one file of seconds transcribed to group's use of day.
func (s *Store) AddTranscribed(ctx context.Context, group, day string, seconds int64) error {
	if group == "" || day == "" || seconds < 0 {
		return fmt.Errorf("add transcribed audio: want a group, a day and seconds ≥ 0 (got %q, %q, %d)", group, day, seconds)
	}
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO transcribe_usage (group_folder, day, seconds, files) VALUES (?, ?, ?, 1)
		ON CONFLICT (group_folder, day) DO UPDATE SET
			seconds = seconds + excluded.seconds, files = files + 1`,
		group, day, seconds); err != nil {
		return fmt.Errorf("add transcribed audio of %q on %s: %w", group, day, err)
	}
	return nil
}

// TranscribedSince lists the audio every group had transcribed on each day
// from day from on, by day then group.
func (s *Store) TranscribedSince(ctx context.Context, from string) ([]domain.Transcribed, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT group_folder, day, seconds, files FROM transcribe_usage
		WHERE day >= ? ORDER BY day, group_folder`, from)
	if err != nil {
		return nil, fmt.Errorf("transcribed audio since %s: %w", from, err)
	}
	defer rows.Close()
	var out []domain.Transcribed
	for rows.Next() {
		var t domain.Transcribed
		if err := rows.Scan(&t.Group, &t.Day, &t.Seconds, &t.Files); err != nil {
			return nil, fmt.Errorf("transcribed audio since %s: %w", from, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transcribed audio since %s: %w", from, err)
	}
	return out, nil
}

// TranscribedOn is the seconds group had transcribed on day.
func (s *Store) TranscribedOn(ctx context.Context, group, day string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `
		SELECT seconds FROM transcribe_usage WHERE group_folder = ? AND day = ?`, group, day).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("transcribed audio of %q on %s: %w", group, day, err)
	}
	return n, nil
}
