package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Approval is one request that waited for the owner, and what became of it.
type Approval struct {
	ID                string
	Group, Run        string
	Subject           string // what was asked, in the audit log's words
	ChatID, MessageID int64  // the message that asks the owner; 0 until sent
	Asked             time.Time
	Decision          string // "" while it waits
	DecidedBy         int64  // the owner's user id, when the owner decided
	Decided           time.Time
}

// AddApproval records a request before the owner is asked.
func (s *Store) AddApproval(ctx context.Context, a Approval) error {
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO approvals (id, group_folder, run, subject, asked) VALUES ($1, $2, $3, $4, $5)`,
		a.ID, a.Group, a.Run, a.Subject, millis(a.Asked)); err != nil {
		return fmt.Errorf("record approval request of %q: %w", a.Group, err)
	}
	return nil
}

// SetApprovalMessage records the message that asks the owner about id.
func (s *Store) SetApprovalMessage(ctx context.Context, id string, chatID, messageID int64) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE approvals SET chat_id = $1, message_id = $2 WHERE id = $3`, chatID, messageID, id); err != nil {
		return fmt.Errorf("record approval message: %w", err)
	}
	return nil
}

// DecideApproval records the decision of a request still waiting; false
// when it was decided already (the first decision stands).
func (s *Store) DecideApproval(ctx context.Context, id, decision string, by int64, at time.Time) (bool, error) {
	res, err := s.w.ExecContext(ctx, `
		UPDATE approvals SET decision = $1, decided_by = $2, decided = $3 WHERE id = $4 AND decision = ''`,
		decision, by, millis(at), id)
	if err != nil {
		return false, fmt.Errorf("record approval decision: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

const approvalColumns = `id, group_folder, run, subject, chat_id, message_id, asked, decision, decided_by, decided`

func scanApproval(sc interface{ Scan(...any) error }) (Approval, error) {
	var a Approval
	err := sc.Scan(&a.ID, &a.Group, &a.Run, &a.Subject, &a.ChatID, &a.MessageID, timeCol{&a.Asked}, &a.Decision, &a.DecidedBy, timeCol{&a.Decided})
	return a, err
}

// ApprovalByID returns the request id.
func (s *Store) ApprovalByID(ctx context.Context, id string) (Approval, bool, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, nil
	}
	if err != nil {
		return Approval{}, false, fmt.Errorf("approval request: %w", err)
	}
	return a, true, nil
}

// ExpireApprovals marks every request still waiting as decided (decision,
// at) and returns them as they were: a host that starts has nobody
// waiting for them any more.
func (s *Store) ExpireApprovals(ctx context.Context, decision string, at time.Time) ([]Approval, error) {
	var out []Approval
	err := withTx(ctx, s.w, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE decision = '' ORDER BY asked`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanApproval(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE approvals SET decision = $1, decided = $2 WHERE decision = ''`, decision, millis(at))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire approval requests: %w", err)
	}
	return out, nil
}

// EgressAllowance is a destination the owner allowed for a group.
type EgressAllowance struct {
	Group     string
	Host      string
	Port      int
	AllowedBy int64
	Allowed   time.Time
}

// AllowEgress remembers host:port for group, allowed by the owner by.
func (s *Store) AllowEgress(ctx context.Context, a EgressAllowance) error {
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO egress_allowed (group_folder, host, port, allowed_by, allowed) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (group_folder, host, port) DO UPDATE SET allowed_by = excluded.allowed_by, allowed = excluded.allowed`,
		a.Group, a.Host, a.Port, a.AllowedBy, millis(a.Allowed)); err != nil {
		return fmt.Errorf("allow egress to %s:%d for %q: %w", a.Host, a.Port, a.Group, err)
	}
	return nil
}

// EgressAllowed returns the allowance of host:port for group, if any.
func (s *Store) EgressAllowed(ctx context.Context, group, host string, port int) (EgressAllowance, bool, error) {
	a := EgressAllowance{Group: group, Host: host, Port: port}
	err := s.r.QueryRowContext(ctx, `SELECT allowed_by, allowed FROM egress_allowed WHERE group_folder = $1 AND host = $2 AND port = $3`,
		group, host, port).Scan(&a.AllowedBy, timeCol{&a.Allowed})
	if errors.Is(err, sql.ErrNoRows) {
		return EgressAllowance{}, false, nil
	}
	if err != nil {
		return EgressAllowance{}, false, fmt.Errorf("egress allowed for %q: %w", group, err)
	}
	return a, true, nil
}

// RevokeEgress forgets what the owner allowed group of host (every port,
// or only port when it is not 0) and answers how many were forgotten.
func (s *Store) RevokeEgress(ctx context.Context, group, host string, port int) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM egress_allowed WHERE group_folder = $1 AND host = $2 AND ($3 = 0 OR port = $4)`, group, host, port, port)
	if err != nil {
		return 0, fmt.Errorf("revoke egress to %s for %q: %w", host, group, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ListEgressAllowed lists what the owner allowed, of group ("" every group's).
func (s *Store) ListEgressAllowed(ctx context.Context, group string) ([]EgressAllowance, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT group_folder, host, port, allowed_by, allowed FROM egress_allowed
		WHERE $1 = '' OR group_folder = $2 ORDER BY group_folder, host, port`, group, group)
	if err != nil {
		return nil, fmt.Errorf("list egress allowed: %w", err)
	}
	defer rows.Close()
	var out []EgressAllowance
	for rows.Next() {
		var a EgressAllowance
		if err := rows.Scan(&a.Group, &a.Host, &a.Port, &a.AllowedBy, timeCol{&a.Allowed}); err != nil {
			return nil, fmt.Errorf("list egress allowed: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
