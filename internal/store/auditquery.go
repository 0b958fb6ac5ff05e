package store

import (
	"context"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// AuditFilter selects audit entries: of one group ("" any; the host's own
// entries have group ""), at or after Since (zero: any time), at most Limit
// of them (<= 0: all).
type AuditFilter struct {
	Group string
	Since time.Time
	Limit int
}

// AuditQuery returns the entries f selects, newest first.
func (s *Store) AuditQuery(ctx context.Context, f AuditFilter) ([]domain.AuditEntry, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT id, time, group_folder, operation, target, decision, reason
		FROM audit_log
		WHERE ($1 = '' OR group_folder = $1) AND time >= $2
		ORDER BY id DESC LIMIT $3`, f.Group, millis(f.Since), limitArg(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []domain.AuditEntry
	for rows.Next() {
		var e domain.AuditEntry
		if err := rows.Scan(&e.ID, timeCol{&e.Time}, &e.Group, &e.Operation, &e.Target, &e.Decision, &e.Reason); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}
