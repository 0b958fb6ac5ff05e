package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// freeLoopbackAddr is a loopback address with a port nothing listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// get fetches path from the host's metrics address: status and body; a
// refused connection is status 0.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// sample is the value of one series in a scrape (its name and labels as
// the exposition writes them, labels sorted by name); -1 when absent.
func sample(body, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// A triggered message moves the counters as the run went: one message in,
// one sandbox run, one send, as many sends counted as Telegram received.
// /readyz follows Telegram's poll, /healthz only the process; the JSON log
// of the whole run never holds the bot token or the provider key.
func TestMetricsReadinessAndRedactedJSONLogs(t *testing.T) {
	addr := freeLoopbackAddr(t)
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{
		"CLAWPEN_METRICS_ADDR": addr, "CLAWPEN_LOG_FORMAT": "json",
	}})
	require.Eventually(t, func() bool { code, _ := get(t, addr, "/readyz"); return code == http.StatusOK },
		harness.Wait, 100*time.Millisecond, "the host never became ready")

	h.RegisterGroup(t, "family")
	sent := `clawpen_telegram_sends_total{result="sent"}`
	run := fmt.Sprintf(`clawpen_agent_runs_total{backend=%q,outcome="ok"}`, harness.Backend())
	triggered := `clawpen_messages_received_total{kind="triggered"}`
	var before string
	// A send is counted right after Telegram took it: wait until the counter
	// caught up with what the fake received.
	require.Eventually(t, func() bool {
		_, before = get(t, addr, "/metrics")
		return sample(before, sent) == float64(len(h.TG.Sent()))
	}, harness.Wait, 50*time.Millisecond, "sends counted != sends received")

	h.Say(harness.GroupChat, "supergroup", "Family Chat", 7, "@Andy what is the plan?")
	h.Replies(harness.GroupChat, 1)
	// The answer goes out before the sandbox has ended: wait for both.
	var after string
	require.Eventually(t, func() bool {
		_, after = get(t, addr, "/metrics")
		return sample(after, sent) == float64(len(h.TG.Sent())) && sample(after, "clawpen_sandboxes_running") == 0
	}, harness.Wait, 50*time.Millisecond, "sends counted != sends received, or a sandbox still runs")
	assert.Equal(t, 1.0, sample(after, triggered)-sample(before, triggered), "one triggered message")
	assert.Equal(t, 1.0, sample(after, run)-sample(before, run), "one agent run")
	assert.Equal(t, 1.0, sample(after, sent)-sample(before, sent), "one send")
	assert.Len(t, h.TG.SentTo(harness.GroupChat), 1)
	assert.Equal(t, 0.0, sample(after, "clawpen_outbox_pending_messages"))
	assert.Greater(t, sample(after, fmt.Sprintf(`clawpen_sandbox_start_seconds_count{backend=%q}`, harness.Backend())), 0.0)
	assert.Greater(t, sample(after, "process_resident_memory_bytes"), 0.0)
	problems, err := promlint.New(strings.NewReader(after)).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems, "the exposition passes promtool's lint")

	// Telegram stops answering: not ready, naming why, though the process lives.
	h.TG.DropNextConnections(1 << 30)
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = get(t, addr, "/readyz")
		return code == http.StatusServiceUnavailable
	}, 2*harness.Wait, 200*time.Millisecond, "still ready with Telegram gone")
	assert.Contains(t, body, "telegram: getUpdates")
	code, _ := get(t, addr, "/healthz")
	assert.Equal(t, http.StatusOK, code)
	h.TG.DropNextConnections(0)
	require.Eventually(t, func() bool { code, _ := get(t, addr, "/readyz"); return code == http.StatusOK },
		harness.Wait, 200*time.Millisecond, "not ready again after Telegram came back")

	h.Stop()
	logs := h.Stderr.String() + h.Stdout.String()
	_, tokenSecret, _ := strings.Cut(harness.BotToken, ":")
	for _, s := range []string{harness.BotToken, tokenSecret, harness.APIKey} {
		assert.NotContains(t, logs, s)
	}
	lines := 0
	for line := range strings.Lines(h.Stderr.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines++
		var v map[string]any
		assert.NoError(t, json.Unmarshal([]byte(line), &v), "not a JSON line: %s", line)
	}
	assert.Greater(t, lines, 5, "the host logged its run")
}

// A backup taken while serve stores a stream of group messages opens,
// passes the integrity check, and holds every message the host had
// acknowledged to Telegram (so stored) before the backup began.
func TestBackupWhileServing(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")

	var mu sync.Mutex
	texts := map[int64]string{} // update id -> text
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			text := fmt.Sprintf("load-%d", i)
			id := h.TG.PushMessage(harness.GroupChat, "supergroup", "Family Chat", faketg.User{ID: 7, FirstName: "member"}, text)
			mu.Lock()
			texts[id] = text
			mu.Unlock()
			if h.TG.Pending() > 50 {
				time.Sleep(5 * time.Millisecond) // keep a backlog, not a flood
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
	start := h.TG.Confirmed()
	require.Eventually(t, func() bool { return h.TG.Confirmed() > start+200 }, harness.Wait, 20*time.Millisecond,
		"the host never stored the stream")

	confirmed := h.TG.Confirmed() // every update below it was stored
	dst := filepath.Join(t.TempDir(), "backup.db")
	out := h.CLI("backup", dst)
	assert.Contains(t, out, "To restore it")
	after := h.TG.Confirmed()
	require.Greater(t, after, confirmed, "the host went on storing while the backup ran")

	ctx := harness.Ctx(t)
	b := h.Restore(dst)
	defer b.Close()
	msgs, err := b.MessagesAfter(ctx, harness.GroupChat, 0, 0)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, m := range msgs {
		have[m.Text] = true
	}
	mu.Lock()
	defer mu.Unlock()
	missing, before := 0, 0
	for id, text := range texts {
		if id < confirmed {
			before++
			if !have[text] {
				missing++
			}
		}
	}
	assert.Zero(t, missing, "messages stored before the backup began but not in it")
	assert.Greater(t, before, 200)
	t.Logf("backup holds %d messages; %d were acknowledged before it began", len(msgs), before)
}

// The audit log is readable where the owner is: /audit in main and
// `clawpen audit` beside the running host, each refusal with its reason.
func TestAuditReadableInMainAndCLI(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	h.Say(harness.StrangerID, "private", "", harness.StrangerID, "let me in")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "/unregister family")
	// Both are handled before the owner's next message (updates go in order).
	h.OwnerSays("/audit 5")
	got := h.Replies(harness.OwnerID, 2)[1]
	assert.Contains(t, got, "host telegram.private deny: private message from user 6666, who is not the owner")
	assert.Contains(t, got, "family command deny: slash command from user")
	assert.Empty(t, h.TG.SentTo(harness.StrangerID))

	out := h.CLI("audit", "--json", "--group", "family", "--since", "1h")
	var entries []map[string]any
	for line := range strings.Lines(out) {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &e), "not JSON: %s", line)
		entries = append(entries, e)
	}
	require.NotEmpty(t, entries)
	for _, e := range entries {
		assert.Equal(t, "family", e["group"])
	}
	assert.Contains(t, out, `"operation":"command","decision":"deny"`)
	assert.NotContains(t, h.CLI("audit", "--group", "family"), "telegram.private")
}
