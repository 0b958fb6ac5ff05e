package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// TestFailover: two `clawpen serve` on one PostgreSQL database (a server
// the test starts), the one serving SIGKILLed while messages flow and its
// sandboxes run. The other stood by (its /healthz said so and named the
// host that served), takes over, and afterwards: nothing lost from the
// store, every triggered message answered, nothing answered twice but the
// documented window, at most one message per chat sent again across the
// crash (decisions.md, "Routing and delivery").
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("the failover test takes about a minute")
	}
	s := size{Name: "failover", Groups: 8, Messages: 400, Rate: 40, BurstEvery: 100, BurstSize: 20,
		TriggerPercent: 30, Bound: 3 * time.Minute}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CLAWPEN_LOAD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CLAWPEN_LOAD_SEED")
		seed = n
	}
	t.Logf("%d groups, %d messages, seed %d (CLAWPEN_LOAD_SEED to repeat)", s.Groups, s.Messages, seed)
	ctx := t.Context()

	addrA, err := freeLoopbackAddr()
	require.NoError(t, err)
	addrB, err := freeLoopbackAddr()
	require.NoError(t, err)
	settings := func(metrics string) map[string]string {
		return map[string]string{"CLAWPEN_METRICS_ADDR": metrics, "CLAWPEN_AGENT_TIMEOUT": agentTimeout,
			"CLAWPEN_MAX_CONCURRENT": maxConcurrent, "CLAWPEN_RETRY_BACKOFF": "200ms,400ms", "CLAWPEN_DEBUG": ""}
	}
	a := harness.New(t, harness.Options{Owner: true, Postgres: true, Extra: settings(addrA)})
	b := harness.New(t, harness.Options{Owner: true, Share: a, Extra: settings(addrB)})

	// b stands by, naming a; it is alive, not ready.
	hostname, err := os.Hostname()
	require.NoError(t, err)
	health, err := debugGet(ctx, addrB, "/healthz", 10*time.Second)
	require.NoError(t, err)
	assert.Contains(t, string(health), fmt.Sprintf("standby: another host serves this database: clawpen serve on %s, pid %d (", hostname, a.PID()))
	_, err = debugGet(ctx, addrB, "/readyz", 10*time.Second)
	require.ErrorContains(t, err, "503", "a standby is not ready")
	_, err = debugGet(ctx, addrA, "/readyz", 10*time.Second)
	require.NoError(t, err, "the serving host is ready")

	r := &run{t: t, h: a, size: s, seed: seed, metricsAddr: addrA, msgs: plan(s, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))),
		faultCounts: map[string]int{}, seenSandboxs: map[pkey]bool{}, zombieSeen: map[pkey]procID{}}
	r.pid.Store(int64(a.PID()))
	r.register()
	sampling, stopSampling := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.sample(sampling) })

	killAt := len(r.msgs) / 3
	began := time.Now()
	var killed time.Time
	for i, m := range r.msgs {
		if i == killAt {
			r.crash()
			killed = r.crashes[0]
			r.h, r.metricsAddr = b, addrB
			r.pid.Store(int64(b.PID()))
		}
		if !m.Burst {
			time.Sleep(time.Duration(float64(time.Second) / r.size.Rate))
		}
		r.push(m)
	}
	pushDur := time.Since(began)
	wctx, cancel := context.WithTimeout(ctx, r.size.Bound)
	defer cancel()
	if !b.Stderr.Wait(wctx, "clawpen serving") {
		t.Fatalf("the standby did not take over within %s; its log:\n%s", r.size.Bound, tail(b.Stderr.String(), 100))
	}
	takeover := logTime(t, b.Stderr.String(), "clawpen serving").Sub(killed)
	r.waitIdle("after the failover")
	stopSampling()
	bg.Wait()
	firstAnswer := time.Duration(0)
	for g := range r.size.Groups {
		for _, sm := range b.TG.SentTo(chatOf(g)) {
			if sm.Time.After(killed) && (firstAnswer == 0 || sm.Time.Sub(killed) < firstAnswer) {
				firstAnswer = sm.Time.Sub(killed)
			}
		}
	}
	b.Stop()

	res := r.analyze()
	res.pushDur, res.total = pushDur, time.Since(began)
	report := r.summary(res) + fmt.Sprintf("takeover\tSIGKILL → standby serving %s, → its first answer %s\n",
		takeover.Round(time.Millisecond), firstAnswer.Round(time.Millisecond)) +
		fmt.Sprintf("resent across the crash\t%d messages, at most %d in one chat\n", res.crashResentMsgs, res.maxResentPerChat)
	fmt.Fprintln(reportWriter(), "\nfailover test (two hosts on one PostgreSQL):\n"+report)

	assert.Zero(t, res.lost, "messages lost from the store: %v", res.lostList)
	assert.Zero(t, res.extraStored, "stored messages that were never sent")
	assert.Zero(t, res.triggerMismatch, "messages stored with the wrong trigger decision")
	assert.Zero(t, res.unanswered, "triggered messages never answered: %v", res.unansweredList)
	assert.Zero(t, res.duplicates, "messages answered more than once, beyond a resend across the crash: %v", res.duplicateList)
	assert.LessOrEqual(t, res.maxResentPerChat, len(r.crashes), "at most one message per chat per crash sent again")
	assert.Zero(t, res.pendingAfterCursor, "triggered messages left behind a group's cursor")
	assert.Zero(t, res.outboxLeft, "answers left in the outbox")
	assert.Empty(t, r.orphans, "sandboxes that outlived the killed host")
	assert.Positive(t, res.answeredEcho, "answers came")
	assert.True(t, strings.Contains(b.Stderr.String(), "serving the database"), "the standby took the lock")
	if t.Failed() {
		t.Logf("standby's log:\n%s", tail(b.Stderr.String(), 200))
	}
}

// logTime is the time of the first line of a host's log holding substr
// (slog's text format: time=RFC 3339 first).
func logTime(t *testing.T, log, substr string) time.Time {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, substr) {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, v)
		require.NoError(t, err, "the time of %q", line)
		return at
	}
	t.Fatalf("no %q in the log", substr)
	return time.Time{}
}
