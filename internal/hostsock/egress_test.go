package hostsock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// auditLog collects a socket's audit entries.
type auditLog struct {
	mu      sync.Mutex
	entries []domain.AuditEntry
}

func (a *auditLog) add(_ context.Context, e domain.AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, e)
	return nil
}

// egressLines are "decision reason" of every egress entry.
func (a *auditLog) egressLines() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.entries {
		if e.Operation == "egress" {
			out = append(out, e.Decision+" "+e.Reason)
		}
	}
	return out
}

// upstream is a loopback HTTP server; its address is listed literally.
func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func egressServer(t *testing.T, egress []string, lim EgressLimits, ipc IPCFunc) (*Server, *auditLog) {
	t.Helper()
	audit := &auditLog{}
	network := domain.NetworkAllowlist
	if egress == nil {
		network = domain.NetworkNone
	}
	s, _ := listen(t, Config{
		Profile: domain.Profile{Name: "web", Network: network, Egress: egress},
		Egress:  lim, Audit: audit.add, IPC: ipc,
		Resolver: fakeResolver{"localhost": {"127.0.0.1"}},
	})
	return s, audit
}

// proxyClient is an HTTP client whose proxy is the socket, as curl in the
// sandbox sees it through the agent's relay.
func proxyClient(s *Server) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", s.Path())
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// connect sends a raw CONNECT on a fresh socket connection and returns the
// status line and the reader behind it.
func connect(t *testing.T, s *Server, target string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c := dial(t, s)
	_, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: proxy\r\n\r\n", target)
	require.NoError(t, err)
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	require.NoError(t, err)
	for { // the headers
		l, err := r.ReadString('\n')
		require.NoError(t, err)
		if l == "\r\n" {
			break
		}
	}
	return c, r, strings.TrimSpace(status)
}

func TestEgressAbsoluteHTTP(t *testing.T) {
	var got atomic.Value
	addr := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	})
	s, audit := egressServer(t, []string{addr}, EgressLimits{}, nil)
	c := proxyClient(s)

	req, _ := http.NewRequest("GET", "http://"+addr+"/page", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Whatever", "x")
	req.Header.Set("X-Kept", "yes")
	resp, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "hello from /page", string(body))
	h := got.Load().(http.Header)
	assert.Empty(t, h.Get("Proxy-Authorization"))
	assert.Empty(t, h.Get("Proxy-Whatever"))
	assert.Empty(t, h.Get("X-Forwarded-For"))
	assert.Equal(t, "yes", h.Get("X-Kept"))

	// A redirect reaches the sandbox as data; the host does not follow it.
	resp, err = c.Get("http://" + addr + "/redirect")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "http://169.254.169.254/latest/meta-data/", resp.Header.Get("Location"))

	// Unlisted: refused with the design's body, and audited.
	resp, err = c.Get("http://127.0.0.1:1/x")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "denied: 127.0.0.1:1 is not in this group's egress list", decodeJSON(t, resp)["error"])

	resp, err = c.Get("https://" + addr + "/x") // as a plain request: not proxied
	if err == nil {
		resp.Body.Close()
	}
	lines := audit.egressLines()
	require.Len(t, lines, 4, "%q", lines)
	assert.Contains(t, lines[0], "allow HTTP "+addr+": allowed by \""+addr+"\", connected to "+addr)
	assert.Contains(t, lines[2], "deny HTTP 127.0.0.1:1: 127.0.0.1:1 is not in this group's egress list")
}

func TestEgressConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() // echo
		}
	}()
	addr := ln.Addr().String()
	s, audit := egressServer(t, []string{addr, "localhost:443"}, EgressLimits{}, nil)

	c, r, status := connect(t, s, addr)
	assert.Equal(t, "HTTP/1.1 200 Connection established", status)
	_, err = c.Write([]byte("ping through the tunnel\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "ping through the tunnel\n", line)
	c.Close()

	for target, reason := range map[string]string{
		"127.0.0.1:1":                 "127.0.0.1:1 is not in this group's egress list",
		"localhost:443":               "localhost resolves to 127.0.0.1, a loopback address",
		"127.1:" + portOf(addr):       "non-standard notation",
		"2130706433:" + portOf(addr):  "non-standard notation",
		"/run/clawpen/host.sock":      "CONNECT wants host:port, not a path",
		"unix:/run/clawpen/host.sock": "CONNECT wants host:port",
		"[::1]:" + portOf(addr):       "not in this group's egress list",
		"example.org":                 "CONNECT wants host:port, with the port",
	} {
		t.Run(target, func(t *testing.T) {
			c, r, status := connect(t, s, target)
			defer c.Close()
			assert.True(t, strings.HasPrefix(status, "HTTP/1.1 403 denied: "), status)
			assert.Contains(t, status, reason)
			body, _ := io.ReadAll(r)
			assert.Contains(t, string(body), `{"error":"denied: `)
		})
	}
	lines := audit.egressLines()
	assert.Len(t, lines, 9)
	assert.True(t, strings.HasPrefix(lines[0], "allow CONNECT "+addr), lines[0])
}

func portOf(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func TestEgressNoNetwork(t *testing.T) {
	addr := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "LEAK") })
	s, audit := egressServer(t, nil, EgressLimits{}, nil)
	resp, err := proxyClient(s).Get("http://" + addr + "/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "denied: this group's sandbox profile has no network", decodeJSON(t, resp)["error"])
	c, _, status := connect(t, s, addr)
	c.Close()
	assert.Contains(t, status, "403 denied: this group's sandbox profile has no network")
	assert.Len(t, audit.egressLines(), 2)
}

// TestEgressNothingAfterTunnel: bytes after a tunnel's end are never read
// as a request on the socket: the connection ends with the tunnel.
func TestEgressNothingAfterTunnel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 5)
		_, _ = io.ReadFull(c, buf)
		got <- string(buf)
		c.Close() // the destination ends the tunnel
	}()
	var ipcCalls atomic.Int32
	ipc := func(context.Context, domain.Caller, string, []byte) (int, any) { ipcCalls.Add(1); return 200, nil }
	s, _ := egressServer(t, []string{ln.Addr().String()}, EgressLimits{}, ipc)

	c, r, status := connect(t, s, ln.Addr().String())
	defer c.Close()
	require.Equal(t, "HTTP/1.1 200 Connection established", status)
	_, err = c.Write([]byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, "hello", <-got)
	smuggled := "POST /ipc/send_message HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" +
		"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n\r\n"
	_, _ = c.Write([]byte(smuggled)) // may already fail: the tunnel is gone
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(r)
	assert.Empty(t, string(rest), "an answer came after the tunnel")
	assert.Zero(t, ipcCalls.Load(), "a request after the tunnel was served")
}

func TestEgressByteCap(t *testing.T) {
	const size = 8 << 20
	addr := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		chunk := make([]byte, 64<<10)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	s, audit := egressServer(t, []string{addr}, EgressLimits{MaxBytes: 1 << 20}, nil)
	c := proxyClient(s)
	resp, err := c.Get("http://" + addr + "/big")
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Error(t, err, "the cut download must not look complete")
	assert.Less(t, n, int64(1<<20)+1, "bytes past the cap reached the sandbox")

	// Spent: the next request is refused outright.
	resp, err = c.Get("http://" + addr + "/more")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, decodeJSON(t, resp)["error"], "egress byte cap of 1 MiB")
	assert.Contains(t, strings.Join(audit.egressLines(), "\n"), "open transfers cut")
}

func TestEgressConnectionCaps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	addr := ln.Addr().String()
	s, _ := egressServer(t, []string{addr}, EgressLimits{MaxConns: 2, MaxTotal: 3}, nil)
	var open []net.Conn
	for range 2 {
		c, _, status := connect(t, s, addr)
		require.Equal(t, "HTTP/1.1 200 Connection established", status)
		open = append(open, c)
	}
	c, _, status := connect(t, s, addr)
	c.Close()
	assert.Contains(t, status, "429 denied: more than 2 egress connections at once")
	open[0].Close()
	require.Eventually(t, func() bool {
		c, _, status := connect(t, s, addr)
		c.Close()
		return strings.Contains(status, "more than 3 egress connections in this run")
	}, 10*time.Second, 20*time.Millisecond)

	// Close cuts the tunnels still open.
	require.NoError(t, s.Close())
	_ = open[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = open[1].Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
}

// holdServer accepts connections and keeps each open until its peer closes:
// the destination of tunnels that stay open.
func holdServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String()
}

// plainProxyRequest sends one absolute-form request to target on a fresh
// socket connection, reads the whole answer and leaves the connection open,
// as a client with a keep-alive pool does, and returns the answer's status.
func plainProxyRequest(t *testing.T, s *Server, target string) int {
	t.Helper()
	c := dial(t, s)
	t.Cleanup(func() { c.Close() })
	_, err := fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestEgressCannotStarveModelOrIPC: however a run uses its egress — tunnels
// held open at the cap, plain requests through the proxy left kept-alive,
// refused requests left open — its model requests and IPC calls still get
// a connection and an answer. The socket's spare connections are the
// model's and IPC's; egress has room of its own and never takes theirs.
func TestEgressCannotStarveModelOrIPC(t *testing.T) {
	const spare, egressCap = 2, 2
	hold := holdServer(t)
	web := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "page") })

	tests := []struct {
		name string
		fill func(t *testing.T, s *Server)
	}{
		{"tunnels at the cap", func(t *testing.T, s *Server) {
			for range egressCap {
				c, _, status := connect(t, s, hold)
				t.Cleanup(func() { c.Close() })
				require.Equal(t, "HTTP/1.1 200 Connection established", status)
			}
		}},
		{"plain requests kept alive", func(t *testing.T, s *Server) {
			for range spare + egressCap {
				status := plainProxyRequest(t, s, web)
				require.Equal(t, http.StatusOK, status)
			}
		}},
		{"tunnels at the cap and refused requests kept alive", func(t *testing.T, s *Server) {
			for range egressCap {
				c, _, status := connect(t, s, hold)
				t.Cleanup(func() { c.Close() })
				require.Equal(t, "HTTP/1.1 200 Connection established", status)
			}
			for range spare {
				status := plainProxyRequest(t, s, web)
				require.Equal(t, http.StatusTooManyRequests, status)
			}
		}},
		{"refused requests kept alive", func(t *testing.T, s *Server) {
			for range spare + egressCap {
				status := plainProxyRequest(t, s, "127.0.0.1:1")
				require.Equal(t, http.StatusForbidden, status)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := fakeAnthropic(t, &recorded{}, nil, new(bool))
			ipc := func(context.Context, domain.Caller, string, []byte) (int, any) {
				return http.StatusOK, map[string]bool{"ok": true}
			}
			s, _ := listen(t, Config{
				Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel, IPC: ipc,
				// Idle connections are not cut while the test waits.
				Limits:   Limits{MaxConns: spare, IdleTimeout: time.Hour},
				Profile:  domain.Profile{Name: "web", Network: domain.NetworkAllowlist, Egress: []string{hold, web}},
				Egress:   EgressLimits{MaxConns: egressCap},
				Resolver: fakeResolver{},
			})
			tc.fill(t, s)

			// A fresh connection for each call, as after an idle one was
			// dropped: it must be accepted while the egress ones stay.
			hc := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", s.Path())
				},
				DisableKeepAlives: true,
			}}
			// Only a guard against hanging forever: answers take milliseconds.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, path := range []string{"/ipc/send_message", "/v1/messages"} {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://clawpen"+path, strings.NewReader(minimalMessages))
				require.NoError(t, err)
				resp, err := hc.Do(req)
				require.NoError(t, err, "%s got no answer while egress held its connections", path)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, path)
			}
		})
	}
}

// Past the per-run audit cap, decisions are written as one row per
// decision when the socket closes, each under its own label: allowed
// connections are not recorded as refusals.
func TestEgressSummaryRowsByDecision(t *testing.T) {
	addr := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	s, audit := egressServer(t, []string{addr, "127.0.0.1:1"}, EgressLimits{}, nil)
	c := proxyClient(s)
	get := func(target string, status int) {
		resp, err := c.Get("http://" + target + "/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, status, resp.StatusCode, target)
	}
	for range maxEgressAudited {
		get(addr, http.StatusOK)
	}
	for range 3 {
		get(addr, http.StatusOK)
	}
	for range 2 {
		get("127.0.0.3:1", http.StatusForbidden) // not listed
	}
	get("127.0.0.1:1", http.StatusBadGateway) // listed, nothing listens
	require.Len(t, audit.egressLines(), maxEgressAudited)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{
		"allow 3 more egress requests allowed in this run, not recorded one by one",
		"deny 2 more egress requests refused in this run, not recorded one by one",
		"error 1 more egress requests failed in this run, not recorded one by one",
	}, audit.egressLines()[maxEgressAudited:])
}
