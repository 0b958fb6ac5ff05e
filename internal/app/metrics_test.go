package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTest() *hostMetrics {
	return newHostMetrics(metricOptions{Operations: []string{"send_message", "schedule_task"}, Backends: []string{"bwrap"}})
}

func TestMetricsPassLint(t *testing.T) {
	m := newTest()
	m.Watch(metricSources{Queue: func() int { return 2 },
		Outbox:     func(context.Context) (int, time.Time, error) { return 1, time.Now().Add(-time.Minute), nil },
		Unrecorded: func() int { return 1 }})
	m.RecordFailed()
	m.Received("triggered")
	m.Sent("throttled")
	m.IPCRefused("send_message")
	problems, err := testutil.GatherAndLint(m.Registry())
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestLabelsStayBounded(t *testing.T) {
	m := newTest()
	// What an agent or a bug could make up never becomes a series.
	m.IPCRefused("../../etc/passwd")
	m.IPCRefused("send_message")
	m.Received("a chat title")
	m.Sent("whatever")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ipcRefusals.WithLabelValues(unknownLabel)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ipcRefusals.WithLabelValues("send_message")))
	assert.Equal(t, 3, testutil.CollectAndCount(m.ipcRefusals), "two operations and unknown")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.received.WithLabelValues("ignored")))
	assert.Equal(t, len(messageKinds), testutil.CollectAndCount(m.received))
	assert.Equal(t, len(sendResults), testutil.CollectAndCount(m.sends))
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *hostMetrics
	m.Received("main")
	m.Sent("sent")
	m.RecordFailed()
	m.IPCRefused("send_message")
	m.Watch(metricSources{})
	assert.Nil(t, m.Sandbox(nil))
}

func TestOutboxAgeAndQueueAreReadAtScrape(t *testing.T) {
	m := newTest()
	n := 0
	m.Watch(metricSources{Queue: func() int { return n },
		Outbox: func(context.Context) (int, time.Time, error) {
			return n, time.Now().Add(-time.Duration(n) * time.Minute), nil
		},
		Unrecorded: func() int { return n - 1 }})
	n = 3
	m.RecordFailed()
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP clawpen_queue_waiting_runs Agent runs (a group's pending messages or a due task) waiting for their turn.
# TYPE clawpen_queue_waiting_runs gauge
clawpen_queue_waiting_runs 3
# HELP clawpen_outbox_pending_messages Outgoing messages stored but not yet recorded as sent (clawpen_outbox_unrecorded_messages of them were sent).
# TYPE clawpen_outbox_pending_messages gauge
clawpen_outbox_pending_messages 3
`), "clawpen_queue_waiting_runs", "clawpen_outbox_pending_messages"))
	assert.Equal(t, 2.0, gatherValue(t, m, "clawpen_outbox_unrecorded_messages"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.recordFails))
	age := gatherValue(t, m, "clawpen_outbox_oldest_age_seconds")
	assert.InDelta(t, 180, age, 5)
}

func gatherValue(t *testing.T, m *hostMetrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

func TestReadyzNamesWhatFails(t *testing.T) {
	broken := true
	h := metricsHandler(newTest(), []readyCheck{
		{Name: "store", Run: func(context.Context) error { return nil }},
		{Name: "telegram", Run: func(context.Context) error {
			if broken {
				return errors.New("getUpdates last answered 40s ago")
			}
			return nil
		}},
	})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	code, body := get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "telegram: getUpdates last answered 40s ago")
	assert.NotContains(t, body, "store")
	code, _ = get("/healthz")
	assert.Equal(t, http.StatusOK, code, "healthz only says the process answers")
	broken = false
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	code, body = get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "clawpen_messages_received_total{kind=\"triggered\"} 0")
}

func TestDecisionsAndTokensMapOntoBoundedLabels(t *testing.T) {
	m := newTest()
	m.Decided("egress", "allow")
	m.Decided("egress", "deny")
	m.Decided("proxy.messages", "deny")
	m.Decided("ipc.anything-an-agent-names", "deny")
	m.Decided("egress", "made-up") // not a decision: not counted
	m.Tokens("family", 100, 20)
	m.Tokens("family", 1, 2)

	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName() // then the label values, sorted by label name
			for _, l := range mt.GetLabel() {
				key += "," + l.GetValue()
			}
			if c := mt.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
		}
	}
	require.Equal(t, 1.0, got["clawpen_host_decisions_total,egress,allow"])
	require.Equal(t, 1.0, got["clawpen_host_decisions_total,egress,deny"])
	require.Equal(t, 1.0, got["clawpen_host_decisions_total,model,deny"])
	require.Equal(t, 1.0, got["clawpen_host_decisions_total,other,deny"])
	require.Equal(t, 101.0, got["clawpen_model_tokens_total,input,family"])
	require.Equal(t, 22.0, got["clawpen_model_tokens_total,output,family"])
	for key := range got {
		require.NotContains(t, key, "made-up")
		require.NotContains(t, key, "anything-an-agent-names")
	}
}
