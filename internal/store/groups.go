package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// checkGroupFolder accepts the main folder or a registrable slug; the
// folder becomes a path under groups/, so nothing else may reach the table.
func checkGroupFolder(folder string) error {
	if folder == domain.MainFolder {
		return nil
	}
	return domain.ValidateFolder(folder)
}

// PutGroup inserts g or replaces the group with the same folder. A chat id
// already registered under another folder is refused with ErrChatTaken.
// A zero Added means now on insert and "keep" on replace.
func (s *Store) PutGroup(ctx context.Context, g domain.Group) error {
	if err := checkGroupFolder(g.Folder); err != nil {
		return fmt.Errorf("put group: %w", err)
	}
	if g.ChatID == 0 {
		return fmt.Errorf("put group %q: zero chat id", g.Folder)
	}
	mounts, err := json.Marshal(g.Mounts)
	if err != nil {
		return fmt.Errorf("put group %q: mounts: %w", g.Folder, err)
	}
	var policy any // NULL when absent
	if len(g.Policy) > 0 {
		policy = string(g.Policy)
	}
	added := g.Added
	if added.IsZero() {
		added = time.Now()
	}
	return withTx(ctx, s.w, func(tx *sql.Tx) error {
		var other string
		err := tx.QueryRowContext(ctx,
			`SELECT folder FROM "groups" WHERE chat_id = $1 AND folder <> $2`, g.ChatID, g.Folder).Scan(&other)
		switch {
		case err == nil:
			return fmt.Errorf("put group %q: %w: chat %d is registered as group %q", g.Folder, ErrChatTaken, g.ChatID, other)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("put group %q: %w", g.Folder, err)
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO "groups" (folder, chat_id, name, trigger_word, profile, mounts, policy, added)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (folder) DO UPDATE SET
				chat_id = excluded.chat_id,
				name = excluded.name,
				trigger_word = excluded.trigger_word,
				profile = excluded.profile,
				mounts = excluded.mounts,
				policy = excluded.policy,
				added = CASE WHEN $9 THEN excluded.added ELSE "groups".added END`,
			g.Folder, g.ChatID, g.Name, g.Trigger, g.Profile, string(mounts), policy, millis(added),
			!g.Added.IsZero())
		if err != nil {
			return fmt.Errorf("put group %q: %w", g.Folder, err)
		}
		return nil
	})
}

// SetGroupProfile sets the sandbox profile of the group registered under
// folder ("" for the built-in default); ErrNotFound when there is none.
func (s *Store) SetGroupProfile(ctx context.Context, folder, profile string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE "groups" SET profile = $1 WHERE folder = $2`, profile, folder)
	if err != nil {
		return fmt.Errorf("set profile of group %q: %w", folder, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("set profile of group %q: %w", folder, err)
	}
	if n == 0 {
		return fmt.Errorf("set profile of group %q: %w", folder, ErrNotFound)
	}
	return nil
}

// DeleteGroup removes the group registered under folder and reports whether
// there was one. Its messages, cursor, session and tasks are left alone.
func (s *Store) DeleteGroup(ctx context.Context, folder string) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM "groups" WHERE folder = $1`, folder)
	if err != nil {
		return false, fmt.Errorf("delete group %q: %w", folder, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete group %q: %w", folder, err)
	}
	return n > 0, nil
}

const groupColumns = `folder, chat_id, name, trigger_word, profile, mounts, policy, added`

// GroupByChat returns the group registered for chatID.
func (s *Store) GroupByChat(ctx context.Context, chatID int64) (domain.Group, bool, error) {
	g, ok, err := s.oneGroup(ctx, `SELECT `+groupColumns+` FROM "groups" WHERE chat_id = $1`, chatID)
	if err != nil {
		return domain.Group{}, false, fmt.Errorf("group of chat %d: %w", chatID, err)
	}
	return g, ok, nil
}

// GroupByFolder returns the group registered under folder.
func (s *Store) GroupByFolder(ctx context.Context, folder string) (domain.Group, bool, error) {
	g, ok, err := s.oneGroup(ctx, `SELECT `+groupColumns+` FROM "groups" WHERE folder = $1`, folder)
	if err != nil {
		return domain.Group{}, false, fmt.Errorf("group %q: %w", folder, err)
	}
	return g, ok, nil
}

// ListGroups returns every registered group ordered by folder.
func (s *Store) ListGroups(ctx context.Context) ([]domain.Group, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+groupColumns+` FROM "groups" ORDER BY folder`)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	defer rows.Close()
	var out []domain.Group
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return out, nil
}

func (s *Store) oneGroup(ctx context.Context, query string, arg any) (domain.Group, bool, error) {
	g, err := scanGroup(s.r.QueryRowContext(ctx, query, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Group{}, false, nil
	}
	if err != nil {
		return domain.Group{}, false, err
	}
	return g, true, nil
}

type scanner interface{ Scan(dest ...any) error }

// scanGroup reads one row of groupColumns. Malformed mounts JSON is an error
// (fail closed); the policy stays raw for its reader to judge.
func scanGroup(sc scanner) (domain.Group, error) {
	var (
		g      domain.Group
		mounts string
		policy sql.NullString
	)
	if err := sc.Scan(&g.Folder, &g.ChatID, &g.Name, &g.Trigger, &g.Profile, &mounts, &policy, timeCol{&g.Added}); err != nil {
		return domain.Group{}, err
	}
	if err := json.Unmarshal([]byte(mounts), &g.Mounts); err != nil {
		return domain.Group{}, fmt.Errorf("group %q: stored mounts: %w", g.Folder, err)
	}
	if policy.Valid {
		g.Policy = json.RawMessage(policy.String)
	}
	return g, nil
}

// RekeyChat follows a Telegram group's migration to a supergroup: the
// registered group, the chat row and the chat's messages, outbox rows and
// tasks move from oldID to newID in one transaction. Cursors are keyed by
// folder and need no change. If newID is already registered under another
// folder, nothing changes and ErrChatTaken is returned.
func (s *Store) RekeyChat(ctx context.Context, oldID, newID int64) error {
	if oldID == 0 || newID == 0 {
		return fmt.Errorf("rekey chat %d -> %d: zero chat id", oldID, newID)
	}
	if oldID == newID {
		return nil
	}
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		var folder string
		err := tx.QueryRowContext(ctx, `SELECT folder FROM "groups" WHERE chat_id = $1`, newID).Scan(&folder)
		switch {
		case err == nil:
			return fmt.Errorf("%w: chat %d is registered as group %q", ErrChatTaken, newID, folder)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		// The new chat may already have a row (the bot saw it before the
		// migration notice); keep the newer metadata and drop the old row.
		stmts := []struct {
			q    string
			args []any
		}{
			{`UPDATE "groups" SET chat_id = $1 WHERE chat_id = $2`, []any{newID, oldID}},
			{`INSERT INTO chats (id, title, type, last_seen)
				SELECT $1, title, type, last_seen FROM chats WHERE id = $2
				ON CONFLICT (id) DO UPDATE SET
					title = CASE WHEN chats.title <> '' THEN chats.title ELSE excluded.title END,
					last_seen = CASE WHEN excluded.last_seen > chats.last_seen THEN excluded.last_seen ELSE chats.last_seen END`,
				[]any{newID, oldID}},
			{`DELETE FROM chats WHERE id = $1`, []any{oldID}},
			// The supergroup numbers its messages anew, so the history's ids
			// are negated (Telegram's are positive) to keep (chat_id,
			// message_id) free for the new ones. An id already taken (by
			// the new chat, or by the old chat's own negative id) stays
			// under the old chat rather than aborting the migration or
			// being lost.
			{`UPDATE messages SET chat_id = $1,
				message_id = CASE WHEN message_id > 0 THEN -message_id ELSE message_id END
				WHERE chat_id = $2
				  AND NOT EXISTS (SELECT 1 FROM messages x WHERE x.chat_id = $1
					AND x.message_id = CASE WHEN messages.message_id > 0 THEN -messages.message_id ELSE messages.message_id END)
				  AND NOT (message_id > 0 AND EXISTS (SELECT 1 FROM messages y WHERE y.chat_id = $2 AND y.message_id = -messages.message_id))`,
				[]any{newID, oldID}},
			{`UPDATE outbox SET chat_id = $1 WHERE chat_id = $2`, []any{newID, oldID}},
			{`UPDATE tasks SET chat_id = $1 WHERE chat_id = $2`, []any{newID, oldID}},
		}
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rekey chat %d -> %d: %w", oldID, newID, err)
	}
	return nil
}
