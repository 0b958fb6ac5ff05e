-- What an audited decision was about (DESIGN.md, "Audit log": group,
-- operation, target, decision, reason, time): an egress destination, a
-- bridge tool, a task. Empty for entries from before and for decisions
-- about a run as a whole.
ALTER TABLE audit_log ADD COLUMN target TEXT NOT NULL DEFAULT '';
