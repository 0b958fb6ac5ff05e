package store

import (
	"context"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// Audit appends e to the audit log; a zero Time means now.
func (s *Store) Audit(ctx context.Context, e domain.AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.Operation == "" || e.Decision == "" {
		return fmt.Errorf("audit: operation and decision are required (got %q, %q)", e.Operation, e.Decision)
	}
	if _, err := s.w.ExecContext(ctx, `
		INSERT INTO audit_log (time, group_folder, operation, target, decision, reason) VALUES ($1, $2, $3, $4, $5, $6)`,
		millis(e.Time), e.Group, e.Operation, e.Target, e.Decision, e.Reason); err != nil {
		return fmt.Errorf("audit %s %s: %w", e.Operation, e.Decision, err)
	}
	return nil
}

// AuditLog returns up to limit entries, newest first (limit <= 0: all).
func (s *Store) AuditLog(ctx context.Context, limit int) ([]domain.AuditEntry, error) {
	return s.AuditQuery(ctx, AuditFilter{Limit: limit})
}
