package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"

	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/runner"
)

// newMetrics is the host's metrics, or nil when CLAWPEN_METRICS_ADDR is
// empty: then nothing is counted at all.
func newMetrics(cfg config.Config) *hostMetrics {
	if cfg.MetricsAddr == "" {
		return nil
	}
	names := make([]string, len(ops.Operations))
	for i, op := range ops.Operations {
		names[i] = string(op)
	}
	return newHostMetrics(metricOptions{Operations: names, Backends: []string{"bwrap", "docker", "gvisor", "none"}})
}

// startMetrics serves /metrics, /healthz and /readyz on CLAWPEN_METRICS_ADDR
// until ctx is done, from the start of serve: hs says what the host does
// until it serves (see serving).
func startMetrics(ctx context.Context, cfg config.Config, m *hostMetrics, hs *health, log *slog.Logger) (wait func(), err error) {
	return serveMetrics(ctx, cfg.MetricsAddr, metricsHandler(m, hs), log)
}

// serving makes the metrics watch host h and its readiness hs. Ready means:
// the database takes a write, getUpdates answered within the last poll
// window (so messages arrive), and a sandbox backend was found (agents can
// run).
func serving(m *hostMetrics, hs *health, h *Host, backend runner.Sandbox) {
	m.Watch(metricSources{Queue: h.Router.QueueWaiting, Outbox: h.store.OutboxStats, Unrecorded: h.Router.Unrecorded})
	_, noSandbox := backend.(unavailable)
	later, _ := backend.(*checkedLater)
	checks := []readyCheck{
		{Name: "store", Run: h.store.Writable},
		{Name: "telegram", Run: func(context.Context) error {
			if age := time.Since(h.telegram.LastPoll()); age > h.telegram.PollWindow() {
				return fmt.Errorf("getUpdates last answered %s ago", age.Round(time.Second))
			}
			return nil
		}},
		{Name: "sandbox", Run: func(context.Context) error {
			if noSandbox || (later != nil && later.failed() != nil) {
				return errors.New("no sandbox backend works on this host: see `clawpen doctor`")
			}
			return nil
		}},
	}
	hs.serving(checks)
}

// countedAudit writes e to the audit log through audit and counts the
// decision for the metrics.
func countedAudit(audit func(context.Context, domain.AuditEntry) error, m *hostMetrics) func(context.Context, domain.AuditEntry) error {
	return func(ctx context.Context, e domain.AuditEntry) error {
		m.Decided(e.Operation, e.Decision)
		return audit(ctx, e)
	}
}

// countedUsage records token use in the store and counts it for the metrics.
type countedUsage struct {
	hostsock.UsageBook
	m *hostMetrics
}

func (u countedUsage) AddUsage(ctx context.Context, group, model, day string, input, output int64) error {
	u.m.Tokens(group, input, output)
	return u.UsageBook.AddUsage(ctx, group, model, day, input, output)
}
