package hostsock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// dial opens a raw connection to the socket; the test writes HTTP by hand.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", s.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return c
}

// answer reads one response from c.
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestConnectionCap(t *testing.T) {
	var mu sync.Mutex
	cur, peak := 0, 0
	entered := make(chan struct{}, 20)
	proceed := make(chan struct{})
	ipc := func(context.Context, domain.Caller, string, []byte) (int, any) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		entered <- struct{}{}
		<-proceed
		mu.Lock()
		cur--
		mu.Unlock()
		return 0, nil
	}
	s, _ := listen(t, Config{IPC: ipc, Limits: Limits{MaxConns: 2}})

	const n = 8
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, s)
		_, err := io.WriteString(conns[i], "POST /ipc/op HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
		require.NoError(t, err)
	}
	<-entered
	<-entered
	// Two are served; the other six wait in the kernel's accept queue, where
	// they cost the host nothing.
	var queued int
	require.Eventually(t, func() bool { queued = acceptQueue(t); return queued == n-2 }, 10*time.Second, 10*time.Millisecond,
		"connections waiting to be accepted: %d", queued)
	close(proceed)
	for _, c := range conns {
		status, _ := answer(t, c)
		assert.Equal(t, http.StatusOK, status)
	}
	assert.Equal(t, 2, peak, "connections served at once")
}

// acceptQueue is how many connections wait to be accepted on this test
// process's listening unix socket, as ss(8) reads it from the kernel. The
// socket is listed under the name it was bound to: a temporary one, reached
// through a descriptor of its directory (/proc/self/fd/N/.tmp-*.sock), so it is
// found by its owner.
func acceptQueue(t *testing.T) int {
	out, err := exec.Command("ss", "-xlnpH").Output()
	require.NoError(t, err, "ss -xlnpH")
	owner := fmt.Sprintf("pid=%d,", os.Getpid())
	for _, l := range strings.Split(string(out), "\n") {
		// u_str LISTEN <queued> <backlog> <path> <inode> * 0 users:((...,pid=N,fd=M))
		if f := strings.Fields(l); len(f) >= 5 && strings.Contains(f[4], "/.tmp-") && strings.Contains(l, owner) {
			q, err := strconv.Atoi(f[2])
			require.NoError(t, err, l)
			return q
		}
	}
	require.Failf(t, "socket not listed", "no listening socket of pid %d:\n%s", os.Getpid(), out)
	return 0
}

func TestHeaderLimits(t *testing.T) {
	s, _ := listen(t, Config{Limits: Limits{HeaderTimeout: 200 * time.Millisecond, MaxHeaderBytes: 1024}})

	t.Run("slow headers are cut", func(t *testing.T) {
		c := dial(t, s)
		_, err := io.WriteString(c, "POST /ipc/op HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		_, err = io.ReadAll(c) // the host closes the connection
		require.NoError(t, err)
	})
	t.Run("large headers are refused", func(t *testing.T) {
		c := dial(t, s)
		_, err := fmt.Fprintf(c, "POST /ipc/op HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", strings.Repeat("a", 8192)) // Go allows 4 KiB over the cap
		require.NoError(t, err)
		// A 431, or a reset when the host closes with the rest unread.
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		} else {
			assert.ErrorIs(t, err, syscall.ECONNRESET)
		}
	})
}

func TestSlowBodyIsCut(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	s, _ := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}, Model: hostModel, Limits: Limits{BodyTimeout: 200 * time.Millisecond}})
	c := dial(t, s)
	_, err := fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(minimalMessages), minimalMessages[:10])
	require.NoError(t, err)
	status, body := answer(t, c)
	assert.Equal(t, http.StatusRequestTimeout, status)
	assert.Equal(t, `{"error":"body not received within 200ms"}`, body)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.paths)
}

// A stream answer lasts longer than the body's read deadline.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	rec := &recorded{}
	proceed := make(chan struct{})
	stalled := false
	up := fakeAnthropic(t, rec, proceed, &stalled)
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}, Model: hostModel, Limits: Limits{BodyTimeout: 100 * time.Millisecond}})
	client := anthropic.NewClient(aoption.WithBaseURL("http://clawpen"), aoption.WithHTTPClient(hc), aoption.WithAPIKey("x"), aoption.WithMaxRetries(0))
	stream := client.Messages.NewStreaming(context.Background(), messageParams())
	defer stream.Close()
	require.True(t, stream.Next(), "first event: %v", stream.Err())
	time.AfterFunc(500*time.Millisecond, func() { close(proceed) })
	var msg anthropic.Message
	require.NoError(t, msg.Accumulate(stream.Current()))
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello", msg.Content[0].Text)
}

func TestBytesInFlightCap(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	s, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}, Model: hostModel,
		Limits: Limits{MaxModelBytes: 1000, MaxInFlightBytes: 1000}})
	body := strings.Replace(minimalMessages, `"hi"`, `"`+strings.Repeat("h", 600)+`"`, 1)

	// One request holds 700 bytes while its body trickles in: the host's
	// "100 Continue" says its handler has counted them and started reading.
	held := dial(t, s)
	_, err := fmt.Fprintf(held, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	heldR := bufio.NewReader(held)
	continued(t, heldR)
	_, err = io.WriteString(held, body[:100])
	require.NoError(t, err)
	// ...so another of the same size does not fit.
	resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": "denied: more than 1000 bytes of requests in flight on this socket"}, decodeJSON(t, resp))

	_, err = io.WriteString(held, body[100:])
	require.NoError(t, err)
	final, err := http.ReadResponse(heldR, nil)
	require.NoError(t, err)
	_ = final.Body.Close()
	assert.Equal(t, http.StatusOK, final.StatusCode)
	// Once it is done the bytes are free again.
	require.Eventually(t, func() bool {
		resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)

	t.Run("chunked counts as the largest allowed", func(t *testing.T) {
		// The last request's bytes may still be counted for a moment after
		// its answer: try until the chunked request is let in.
		require.Eventually(t, func() bool {
			c := dial(t, s)
			_, err := io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
			require.NoError(t, err)
			line, err := bufio.NewReader(c).ReadString('\n')
			return err == nil && line == "HTTP/1.1 100 Continue\r\n"
		}, 10*time.Second, 10*time.Millisecond)
		resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(minimalMessages))
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	})
}

// continued reads the host's "100 Continue": the handler has begun reading the body.
func continued(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
	blank, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "\r\n", blank)
}

func TestTrailersRefused(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	s, _ := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel})
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n", len(minimalMessages), minimalMessages)
	tests := []struct{ name, head, tail string }{
		{"declared", "Trailer: X-Api-Key\r\n", "X-Api-Key: sk-smuggled\r\n\r\n"},
		{"undeclared", "", "Authorization: Bearer smuggled\r\nX-Api-Key: sk-smuggled\r\n\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			_, err := io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"+tc.head+"\r\n"+chunked+tc.tail)
			require.NoError(t, err)
			status, body := answer(t, c)
			assert.Equal(t, http.StatusForbidden, status)
			assert.Equal(t, `{"error":"denied: request trailers are not accepted"}`, body)
		})
	}
	t.Run("chunked without trailers passes", func(t *testing.T) {
		c := dial(t, s)
		_, err := io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+chunked+"\r\n")
		require.NoError(t, err)
		status, _ := answer(t, c)
		assert.Equal(t, http.StatusOK, status)
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Len(t, rec.paths, 1, "only the request without trailers reached the provider")
	for _, h := range rec.headers {
		assert.Equal(t, []string{hostKey}, h.Values("X-Api-Key"))
		assert.Empty(t, h.Values("Authorization"))
	}
}

func TestRequestRateCap(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}, Model: hostModel,
		Limits: Limits{RequestBurst: 3, RequestsPerSecond: 0.01}})
	var statuses []int
	var last *http.Response
	for range 5 {
		resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(minimalMessages))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		last = resp
	}
	assert.Equal(t, []int{200, 200, 200, 429, 429}, statuses)
	assert.Equal(t, "101", last.Header.Get("Retry-After"))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Len(t, rec.paths, 3)
}

func TestRefusalsAudited(t *testing.T) {
	var mu sync.Mutex
	var entries []domain.AuditEntry
	audit := func(_ context.Context, e domain.AuditEntry) error {
		mu.Lock()
		defer mu.Unlock()
		entries = append(entries, e)
		return nil
	}
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	s, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}, Model: hostModel, Audit: audit})
	serverTool := `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`
	for range maxAudited + 5 {
		resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(serverTool))
		require.NoError(t, err)
		got := decodeJSON(t, resp)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Equal(t, `denied: server tool "web_fetch_20250910" (tools.0) is not allowed: only the agent's own tools are`, got["error"])
	}
	mu.Lock()
	require.Len(t, entries, maxAudited, "the first refusals are written one by one")
	assert.Equal(t, domain.AuditEntry{Time: entries[0].Time, Group: "team", Operation: "proxy.messages", Decision: "deny",
		Reason: `server tool "web_fetch_20250910" (tools.0) is not allowed: only the agent's own tools are`}, entries[0])
	mu.Unlock()
	require.NoError(t, s.Close())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, entries, maxAudited+1, "the rest as one entry when the socket closes")
	assert.Equal(t, "5 more refusals on this socket", entries[maxAudited].Reason)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.paths)
}

func TestNoModelConfigured(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL}})
	resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(minimalMessages))
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": "denied: no model is configured for this group"}, decodeJSON(t, resp))
}
