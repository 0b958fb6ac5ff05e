// The host's Prometheus instrumentation and its health endpoints: one
// registry of its own (no global state), the counters and histograms the
// host's parts report to through small hooks, and the handler serving
// /metrics, /healthz and /readyz on CLAWPEN_METRICS_ADDR. The instrumented
// packages never import prometheus: the router and the operations service
// call plain functions, the sandbox backend is wrapped.

package app

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Message kinds (clawpen_messages_received_total's kind): the owner's
// private chat, a stored group message, one that called the agent, an
// owner's command, and what the host kept nothing of.
var messageKinds = []string{"main", "group", "triggered", "command", "ignored"}

// Send results (clawpen_telegram_sends_total's result): accepted by
// Telegram, throttled with a 429 (retried after retry_after), failed
// (retried with backoff), dropped (refused for good, or out of attempts).
var sendResults = []string{"sent", "throttled", "failed", "dropped"}

// Run outcomes (clawpen_agent_runs_total's outcome).
var runOutcomes = []string{"ok", "failed", "timeout", "output_limit", "oom", "pids_limit", "disk_limit", "error"}

// unknownLabel is the label of an operation the host does not know: an agent
// may ask for any name, and a label must not take unbounded input.
const unknownLabel = "unknown"

// metricOptions shape the metrics.
type metricOptions struct {
	// Operations are the IPC operation names that may appear as labels;
	// any other is counted as Unknown.
	Operations []string
	// Backends are the sandbox backend names whose series start at zero.
	Backends []string
}

// hostMetrics holds the host's registry and collectors. Its methods are safe
// for concurrent use; a nil *Metrics records nothing, so a host without
// CLAWPEN_METRICS_ADDR passes nil.
type hostMetrics struct {
	reg *prometheus.Registry
	ops []string

	received     *prometheus.CounterVec
	sends        *prometheus.CounterVec
	recordFails  prometheus.Counter
	runs         *prometheus.CounterVec
	runDuration  *prometheus.HistogramVec
	sandboxStart *prometheus.HistogramVec
	running      prometheus.Gauge
	warm         prometheus.Gauge
	ipcRefusals  *prometheus.CounterVec
	decisions    *prometheus.CounterVec
	tokens       *prometheus.CounterVec

	mu      sync.Mutex
	sources metricSources
}

// metricSources are read at each scrape: what the host holds as state rather than
// counts as events. A nil function leaves its series out.
type metricSources struct {
	// Queue is the number of agent runs waiting for their turn.
	Queue func() int
	// Outbox is the undelivered outgoing messages and the time the oldest
	// was queued (zero when none).
	Outbox func(ctx context.Context) (n int, oldest time.Time, err error)
	// Unrecorded is the outgoing messages sent whose record as sent the
	// database has refused so far.
	Unrecorded func() int
}

// newHostMetrics makes the collectors and registers them, with the Go runtime and
// process collectors (memory, CPU, file descriptors), on a registry of its own.
func newHostMetrics(o metricOptions) *hostMetrics {
	m := &hostMetrics{
		reg: prometheus.NewRegistry(),
		ops: o.Operations,
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_messages_received_total",
			Help: "Inbound Telegram messages by what the host did with them: main, group (stored as context), triggered (called the agent), command, ignored.",
		}, []string{"kind"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_telegram_sends_total",
			Help: "Attempts to send an outbox message to Telegram by result: sent, throttled (429, retried), failed (retried), dropped.",
		}, []string{"result"}),
		recordFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clawpen_outbox_record_failures_total",
			Help: "Failed attempts to record an outbox message as sent (or given up) after delivery was done with it: the database refused. Only the record is retried; while the host runs the message is not sent again.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_agent_runs_total",
			Help: "Sandboxed agent invocations that ended, by backend and outcome (ok, failed: non-zero exit, timeout, output_limit, " +
				"oom: the kernel killed a process at the memory limit, pids_limit: a fork was refused at the process limit, " +
				"disk_limit: stopped at the disk quota, error: the sandbox could not run).",
		}, []string{"backend", "outcome"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clawpen_agent_run_duration_seconds",
			Help:    "Wall time of a sandboxed agent invocation, from the sandbox's start to its end.",
			Buckets: []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"backend"}),
		sandboxStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clawpen_sandbox_start_seconds",
			Help:    "Time from asking the backend for a sandbox to the agent's first output (its ready line).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"backend"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawpen_sandboxes_running",
			Help: "Sandboxes running a job now.",
		}),
		warm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawpen_sandboxes_warm",
			Help: "Sandboxes started and waiting for their job (warm sandboxes, and a cold one for the moment before its job is given).",
		}),
		ipcRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_ipc_refusals_total",
			Help: "Agents' requests to the host refused, by operation (unknown: a name the host does not know).",
		}, []string{"operation"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_host_decisions_total",
			Help: "Decisions of a run's host socket as audited, by area (egress: the egress proxy; model: the model proxy; other) and decision (allow, deny, error). A flood's refusals past the audit's per-run cap are not counted one by one.",
		}, []string{"area", "decision"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawpen_model_tokens_total",
			Help: "Model tokens used through the host's proxy, by group folder and direction (input, cache reads and writes included; output).",
		}, []string{"group", "direction"}),
	}
	m.reg.MustRegister(m.received, m.sends, m.recordFails, m.runs, m.runDuration, m.sandboxStart, m.running, m.warm, m.ipcRefusals, m.decisions, m.tokens,
		stateCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series of a bounded label set starts at zero, so rate() and
	// alerts see the first event.
	for _, k := range messageKinds {
		m.received.WithLabelValues(k)
	}
	for _, r := range sendResults {
		m.sends.WithLabelValues(r)
	}
	for _, b := range o.Backends {
		for _, out := range runOutcomes {
			m.runs.WithLabelValues(b, out)
		}
	}
	for _, a := range decisionAreas {
		for _, d := range decisionKinds {
			m.decisions.WithLabelValues(a, d)
		}
	}
	for _, op := range append(slices.Clone(o.Operations), unknownLabel) {
		m.ipcRefusals.WithLabelValues(op)
	}
	return m
}

// Registry is the registry /metrics serves.
func (m *hostMetrics) Registry() *prometheus.Registry { return m.reg }

// Watch sets what is read at each scrape.
func (m *hostMetrics) Watch(s metricSources) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.sources = s
	m.mu.Unlock()
}

// Received counts an inbound message of kind (one of messageKinds; any
// other is a bug and counted as ignored rather than minting a series).
func (m *hostMetrics) Received(kind string) {
	if m == nil {
		return
	}
	if !slices.Contains(messageKinds, kind) {
		kind = "ignored"
	}
	m.received.WithLabelValues(kind).Inc()
}

// Sent counts one send attempt's result (one of sendResults).
func (m *hostMetrics) Sent(result string) {
	if m == nil || !slices.Contains(sendResults, result) {
		return
	}
	m.sends.WithLabelValues(result).Inc()
}

// RecordFailed counts a failed attempt to record an outbox message as sent.
func (m *hostMetrics) RecordFailed() {
	if m == nil {
		return
	}
	m.recordFails.Inc()
}

// IPCRefused counts a refused agent request of operation op.
func (m *hostMetrics) IPCRefused(op string) {
	if m == nil {
		return
	}
	if !slices.Contains(m.ops, op) {
		op = unknownLabel
	}
	m.ipcRefusals.WithLabelValues(op).Inc()
}

// Areas and decisions of clawpen_host_decisions_total.
var (
	decisionAreas = []string{"egress", "model", "other"}
	decisionKinds = []string{"allow", "deny", "error"}
)

// Decided counts one audited decision of a run's socket: operation as the
// audit log names it ("egress", "proxy.messages", …), decision allow, deny
// or error. Both map onto fixed label sets.
func (m *hostMetrics) Decided(operation, decision string) {
	if m == nil || !slices.Contains(decisionKinds, decision) {
		return
	}
	area := "other"
	switch {
	case operation == "egress":
		area = "egress"
	case strings.HasPrefix(operation, "proxy."):
		area = "model"
	}
	m.decisions.WithLabelValues(area, decision).Inc()
}

// Tokens counts a model answer's tokens for group, a registered folder (a
// bounded set: only registered groups run).
func (m *hostMetrics) Tokens(group string, input, output int64) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(group, "input").Add(float64(max(input, 0)))
	m.tokens.WithLabelValues(group, "output").Add(float64(max(output, 0)))
}

// stateCollector reads the Sources at scrape time.
type stateCollector struct{ m *hostMetrics }

var (
	queueDesc = prometheus.NewDesc("clawpen_queue_waiting_runs",
		"Agent runs (a group's pending messages or a due task) waiting for their turn.", nil, nil)
	outboxDesc = prometheus.NewDesc("clawpen_outbox_pending_messages",
		"Outgoing messages stored but not yet recorded as sent (clawpen_outbox_unrecorded_messages of them were sent).", nil, nil)
	unrecordedDesc = prometheus.NewDesc("clawpen_outbox_unrecorded_messages",
		"Outgoing messages sent (or given up) whose record as sent the database refuses so far; they are not sent again while the host runs.", nil, nil)
	outboxAgeDesc = prometheus.NewDesc("clawpen_outbox_oldest_age_seconds",
		"Age of the oldest undelivered outgoing message; 0 when the outbox is empty.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDesc
	ch <- outboxDesc
	ch <- outboxAgeDesc
	ch <- unrecordedDesc
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	s := c.m.sources
	c.m.mu.Unlock()
	if s.Queue != nil {
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(s.Queue()))
	}
	if s.Unrecorded != nil {
		ch <- prometheus.MustNewConstMetric(unrecordedDesc, prometheus.GaugeValue, float64(s.Unrecorded()))
	}
	if s.Outbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, oldest, err := s.Outbox(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(outboxDesc, err)
			return
		}
		age := 0.0
		if n > 0 && !oldest.IsZero() {
			age = max(time.Since(oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, age)
	}
}
