package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/gateway"
	"github.com/clawpen/clawpen/internal/hostsock"
)

const serverName = "clawpen-gateway"

// logBuf collects a gateway's and its invocations' logs.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is a gateway under test with the credentials it handed out.
type env struct {
	t     *testing.T
	g     *gateway.Gateway
	log   *slog.Logger
	logs  *logBuf
	mu    sync.Mutex
	creds []string
}

// newEnv starts a gateway on loopback. When the test ends, no credential
// it handed out may appear in anything logged.
func newEnv(t *testing.T, cfg gateway.Config) *env {
	t.Helper()
	logs := &logBuf{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Hosts = []string{serverName}
	cfg.Logger = log
	g, err := gateway.Listen("127.0.0.1:0", cfg)
	require.NoError(t, err)
	e := &env{t: t, g: g, log: log, logs: logs}
	t.Cleanup(func() {
		require.NoError(t, g.Close())
		text := logs.String()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.creds {
			assert.NotContains(t, text, c, "a credential was logged")
			assert.NotContains(t, text, c[:16], "part of a credential was logged")
		}
	})
	return e
}

// inv is one registered invocation: its real hostsock server, whose IPC
// records who each request reached.
type inv struct {
	caller  domain.Caller
	cred    string
	end     func()
	mu      sync.Mutex
	calls   []domain.Caller
	headers []http.Header // of requests to /mcp, as the invocation's server saw them
}

func (i *inv) reached() []domain.Caller {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]domain.Caller(nil), i.calls...)
}

func (e *env) register(group string, cfg hostsock.Config) *inv {
	e.t.Helper()
	i := &inv{caller: domain.Caller{Group: group, ChatID: int64(len(group)), Run: "run-" + group}}
	cfg.Logger = e.log
	cfg.IPC = func(_ context.Context, c domain.Caller, op string, _ []byte) (int, any) {
		i.mu.Lock()
		i.calls = append(i.calls, c)
		i.mu.Unlock()
		return 200, map[string]string{"group": c.Group, "op": op}
	}
	cfg.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		i.headers = append(i.headers, r.Header.Clone())
		i.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	s, err := hostsock.New(i.caller, cfg)
	require.NoError(e.t, err)
	i.cred, i.end, err = e.g.Register(s)
	require.NoError(e.t, err)
	e.mu.Lock()
	e.creds = append(e.creds, i.cred)
	e.mu.Unlock()
	e.t.Cleanup(func() {
		i.end()
		require.NoError(e.t, s.Close())
	})
	return i
}

func (e *env) tlsConfig() *tls.Config {
	roots := x509.NewCertPool()
	require.True(e.t, roots.AppendCertsFromPEM(e.g.CACert()))
	return &tls.Config{RootCAs: roots, ServerName: serverName}
}

// client is a plain HTTPS client of the gateway (not the agent's).
func (e *env) client() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: e.tlsConfig()}, Timeout: 10 * time.Second}
}

func (e *env) url(path string) string { return "https://" + e.g.Addr().String() + path }

// post posts {} to path with the given credential header values.
func (e *env) post(c *http.Client, path string, creds ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader("{}"))
	require.NoError(e.t, err)
	for _, cr := range creds {
		req.Header.Add(gateway.CredentialHeader, cr)
	}
	res, err := c.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, string(b)
}

// rawConn is one TLS connection written to by hand.
type rawConn struct {
	t *testing.T
	c *tls.Conn
	r *bufio.Reader
}

func (e *env) dial() *rawConn {
	e.t.Helper()
	c, err := tls.Dial("tcp", e.g.Addr().String(), e.tlsConfig())
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: e.t, c: c, r: bufio.NewReader(c)}
}

// do sends one request on the connection and reads its answer; err is the
// connection's failure (cut by the gateway).
func (rc *rawConn) do(path, cred, body string) (int, string, error) {
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, serverName, len(body))
	if cred != "" {
		req += gateway.CredentialHeader + ": " + cred + "\r\n"
	}
	req += "\r\n" + body
	if _, err := io.WriteString(rc.c, req); err != nil {
		return 0, "", err
	}
	res, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func denial(t *testing.T, body string) string {
	t.Helper()
	var v struct{ Error string }
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	require.True(t, strings.HasPrefix(v.Error, "denied: "), body)
	return v.Error
}

// TestCredentialReachesOnlyItsInvocation: each credential reaches its own
// invocation's server and no other, whatever else the request says; a
// connection one invocation opened cannot be used with another's
// credential; and nothing the gateway answers holds another's credential.
func TestCredentialReachesOnlyItsInvocation(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	b := e.register("beta", hostsock.Config{})
	require.NotEqual(t, a.cred, b.cred)

	st, body := e.post(e.client(), "/ipc/list_tasks", a.cred)
	require.Equal(t, http.StatusOK, st, body)
	assert.JSONEq(t, `{"group":"alpha","op":"list_tasks"}`, body)
	st, body = e.post(e.client(), "/ipc/list_tasks?group=alpha&run=run-alpha", b.cred)
	require.Equal(t, http.StatusOK, st, body)
	assert.JSONEq(t, `{"group":"beta","op":"list_tasks"}`, body)
	assert.Equal(t, []domain.Caller{a.caller}, a.reached())
	assert.Equal(t, []domain.Caller{b.caller}, b.reached())

	// One connection, bound to alpha by its first request, then beta's
	// credential on it: refused, cut, and beta not reached.
	rc := e.dial()
	st, body, err := rc.do("/ipc/send_message", a.cred, "{}")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, body)
	st, body, err = rc.do("/ipc/send_message", b.cred, "{}")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, st)
	assert.Equal(t, "denied: this connection belongs to another invocation", denial(t, body))
	assert.NotContains(t, body, a.cred)
	assert.NotContains(t, body, b.cred)
	_, _, err = rc.do("/ipc/send_message", a.cred, "{}")
	assert.Error(t, err, "the connection must be cut after the refusal")
	assert.Len(t, a.reached(), 2)
	assert.Len(t, b.reached(), 1)

	// Both credentials at once: neither is taken.
	st, body = e.post(e.client(), "/ipc/list_tasks", a.cred, b.cred)
	assert.Equal(t, http.StatusUnauthorized, st)
	denial(t, body)
	assert.Len(t, a.reached(), 2)
	assert.Len(t, b.reached(), 1)
}

// TestCredentialsAreRandom: every registration gets a fresh 256-bit
// credential; nothing about one tells another (a group holds only its own).
func TestCredentialsAreRandom(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	seen := map[string]bool{}
	for range 50 {
		i := e.register("g", hostsock.Config{})
		raw, err := base64.RawURLEncoding.DecodeString(i.cred)
		require.NoError(t, err)
		require.Len(t, raw, 32)
		require.False(t, seen[i.cred], "credential handed out twice")
		seen[i.cred] = true
	}
}

// TestEndedCredentialRefused: once its invocation ended, a credential
// reaches nothing, and the invocation's open connections are cut.
func TestEndedCredentialRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	rc := e.dial()
	st, _, err := rc.do("/ipc/list_tasks", a.cred, "{}")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)

	a.end()
	_, _, err = rc.do("/ipc/list_tasks", a.cred, "{}")
	assert.Error(t, err, "an ended invocation's open connection must be cut")
	st, body := e.post(e.client(), "/ipc/list_tasks", a.cred)
	assert.Equal(t, http.StatusUnauthorized, st)
	assert.Equal(t, "denied: credential not valid (unknown, or its invocation ended)", denial(t, body))
	assert.Len(t, a.reached(), 1)
	// Another invocation is untouched by it.
	b := e.register("beta", hostsock.Config{})
	st, _ = e.post(e.client(), "/ipc/list_tasks", b.cred)
	assert.Equal(t, http.StatusOK, st)
}

// TestNoCredentialRefused: a request without the header reaches nothing,
// on any route, and its connection is closed.
func TestNoCredentialRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	for _, path := range []string{"/ipc/list_tasks", "/v1/messages", "/v1/chat/completions", "/mcp", "/"} {
		rc := e.dial()
		st, body, err := rc.do(path, "", "{}")
		require.NoError(t, err, path)
		assert.Equal(t, http.StatusUnauthorized, st, path)
		assert.Equal(t, "denied: no credential", denial(t, body))
		_, _, err = rc.do(path, a.cred, "{}")
		assert.Error(t, err, "a refused connection must be closed")
	}
	// The egress proxy's forms too.
	rc := e.dial()
	_, err := io.WriteString(rc.c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(rc.r, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.Empty(t, a.reached())
}

// TestForgedCredentialRefused: anything but the exact credential of a
// running invocation is refused.
func TestForgedCredentialRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	flip := []byte(a.cred)
	flip[len(flip)-1] ^= 1
	upper := strings.ToUpper(a.cred)
	for name, cred := range map[string]string{
		"random":     base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
		"one bit":    string(flip),
		"prefix":     a.cred[:len(a.cred)-1],
		"longer":     a.cred + "A",
		"padded":     a.cred + "=",
		"spaces":     " " + a.cred + "x",
		"case":       upper,
		"bearer":     "Bearer " + a.cred,
		"std base64": strings.NewReplacer("-", "+", "_", "/").Replace(a.cred) + "x",
	} {
		if cred == a.cred {
			continue // a credential without those characters
		}
		st, body := e.post(e.client(), "/ipc/list_tasks", cred)
		assert.Equal(t, http.StatusUnauthorized, st, name)
		denial(t, body)
	}
	assert.Empty(t, a.reached())
}

// TestCredentialInQueryRefused: only the header counts, so that a
// credential never needs to be in a URL, which logs and proxies keep.
func TestCredentialInQueryRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	for _, q := range []string{"credential", gateway.CredentialHeader, "access_token", "token"} {
		st, body := e.post(e.client(), "/ipc/list_tasks?"+q+"="+a.cred)
		assert.Equal(t, http.StatusUnauthorized, st, q)
		denial(t, body)
	}
	assert.Empty(t, a.reached())
}

// TestPlaintextRefused: HTTP without TLS, even with a valid credential,
// reaches nothing.
func TestPlaintextRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	c, err := net.Dial("tcp", e.g.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /ipc/list_tasks HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Length: 2\r\n\r\n{}", gateway.CredentialHeader, a.cred)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Empty(t, a.reached())
}

// TestWrongCAFails: a client that trusts only the gateway's CA does not
// talk to another server that says it is the gateway, and the CA signs
// nothing but the gateway's names.
func TestWrongCAFails(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	other := newEnv(t, gateway.Config{})
	conf := e.tlsConfig()
	_, err := tls.Dial("tcp", other.g.Addr().String(), conf)
	require.Error(t, err)
	conf.ServerName = "api.anthropic.com"
	_, err = tls.Dial("tcp", e.g.Addr().String(), conf)
	require.Error(t, err)
}

// TestOversizedHeadersRefused: headers above the host socket's limit are
// refused before any invocation is looked at.
func TestOversizedHeadersRefused(t *testing.T) {
	e := newEnv(t, gateway.Config{Limits: hostsock.Limits{MaxHeaderBytes: 4 << 10}})
	a := e.register("alpha", hostsock.Config{})
	rc := e.dial()
	big := strings.Repeat("x", 64<<10)
	go func() {
		_, _ = fmt.Fprintf(rc.c, "POST /ipc/list_tasks HTTP/1.1\r\nHost: x\r\n%s: %s\r\nX-Big: %s\r\nContent-Length: 2\r\n\r\n{}", gateway.CredentialHeader, a.cred, big)
	}()
	// The answer is 431, unless the gateway's close of a connection with
	// unread bytes reset it first; either way the request reaches nothing.
	if res, err := http.ReadResponse(rc.r, nil); err == nil {
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)
	}
	assert.Empty(t, a.reached())
	st, _ := e.post(e.client(), "/ipc/list_tasks", a.cred)
	assert.Equal(t, http.StatusOK, st)
}

// TestSlowConnectionsCut: connections that never finish a handshake or a
// request header hold the few unbound slots only until the header timeout;
// then they are cut and a real client gets through.
func TestSlowConnectionsCut(t *testing.T) {
	e := newEnv(t, gateway.Config{MaxUnbound: 2, Limits: hostsock.Limits{HeaderTimeout: 300 * time.Millisecond}})
	a := e.register("alpha", hostsock.Config{})
	var slow []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", e.g.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		slow = append(slow, c)
	}
	hs := e.dial() // handshake done, header never finished
	_, err := io.WriteString(hs.c, "POST /ipc/list_tasks HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)

	st, body := e.post(e.client(), "/ipc/list_tasks", a.cred)
	assert.Equal(t, http.StatusOK, st, body)
	for _, c := range slow {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := io.Copy(io.Discard, c)
		assert.NoError(t, err, "the gateway must close a connection that sends nothing")
	}
	require.NoError(t, hs.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.Copy(io.Discard, hs.c)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the gateway must cut an unfinished header: %v", err)
}

// TestConnectionsPerInvocation: an invocation holds at most its server's
// MaxConns connections at the gateway, as on its socket; another
// invocation's are its own.
func TestConnectionsPerInvocation(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{Limits: hostsock.Limits{MaxConns: 2}})
	b := e.register("beta", hostsock.Config{Limits: hostsock.Limits{MaxConns: 2}})
	var open []*rawConn
	for range 2 {
		rc := e.dial()
		st, _, err := rc.do("/ipc/list_tasks", a.cred, "{}")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, st)
		open = append(open, rc)
	}
	rc := e.dial()
	st, body, err := rc.do("/ipc/list_tasks", a.cred, "{}")
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, st)
	assert.Equal(t, "denied: more than 2 connections of this invocation", denial(t, body))

	st, _ = e.post(e.client(), "/ipc/list_tasks", b.cred)
	assert.Equal(t, http.StatusOK, st, "another invocation's connections are its own")

	require.NoError(t, open[0].c.Close())
	require.Eventually(t, func() bool {
		st, _, err := e.dial().do("/ipc/list_tasks", a.cred, "{}")
		return err == nil && st == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "a closed connection gives its slot back")
}

// TestBytesInFlightPerInvocation: request bodies on all of an
// invocation's gateway connections count against its one budget of bytes
// in flight, as on its socket, and not against another's.
func TestBytesInFlightPerInvocation(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	lim := hostsock.Limits{MaxInFlightBytes: 1000, MaxIPCBytes: 4000, BodyTimeout: time.Minute}
	a := e.register("alpha", hostsock.Config{Limits: lim})
	b := e.register("beta", hostsock.Config{Limits: lim})

	holder := e.dial() // announces 800 bytes and sends one
	_, err := fmt.Fprintf(holder.c, "POST /ipc/x HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Length: 800\r\n\r\n{", gateway.CredentialHeader, a.cred)
	require.NoError(t, err)
	body := `{"pad":"` + strings.Repeat("p", 790) + `"}`
	require.Eventually(t, func() bool {
		rc := e.dial()
		defer rc.c.Close()
		st, body, err := rc.do("/ipc/x", a.cred, body)
		return err == nil && st == http.StatusTooManyRequests && strings.Contains(body, "bytes of requests in flight")
	}, 10*time.Second, 20*time.Millisecond, "the second body must not fit beside the first")
	st, _, err := e.dial().do("/ipc/x", b.cred, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, st, "another invocation has its own budget")
}

// TestCredentialNotForwarded: the invocation's server, and through it the
// model provider, never see the credential.
func TestCredentialNotForwarded(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer up.Close()
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: up.URL, APIKey: "host-key"}, Model: "m"})

	st, _ := e.post(e.client(), "/mcp", a.cred)
	require.Equal(t, http.StatusNoContent, st)
	req, err := http.NewRequest(http.MethodPost, e.url("/v1/messages"), strings.NewReader(`{"model":"x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set(gateway.CredentialHeader, a.cred)
	req.Header.Set("Content-Type", "application/json")
	res, err := e.client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))

	a.mu.Lock()
	hs := append([]http.Header(nil), a.headers...)
	a.mu.Unlock()
	mu.Lock()
	hs = append(hs, seen...)
	mu.Unlock()
	require.Len(t, hs, 2)
	for _, h := range hs {
		assert.Empty(t, h.Values(gateway.CredentialHeader))
		for k, v := range h {
			assert.NotContains(t, strings.Join(v, " "), a.cred, k)
		}
	}
}

// TestEndUnderLoad: ending an invocation while its agent keeps sending
// leaves at most the requests already accepted running, one per
// connection; every request after that is refused or finds its connection
// cut.
func TestEndUnderLoad(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	a := e.register("alpha", hostsock.Config{})
	const workers = 4
	ended := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	okAfter := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.client()
			for {
				select {
				case <-ended:
					// Past the end, nothing may succeed.
					for range 5 {
						req, _ := http.NewRequest(http.MethodPost, e.url("/ipc/x"), strings.NewReader("{}"))
						req.Header.Set(gateway.CredentialHeader, a.cred)
						if res, err := c.Do(req); err == nil {
							if res.StatusCode == http.StatusOK {
								mu.Lock()
								okAfter++
								mu.Unlock()
							}
							res.Body.Close()
						}
					}
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, e.url("/ipc/x"), strings.NewReader("{}"))
				req.Header.Set(gateway.CredentialHeader, a.cred)
				if res, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return len(a.reached()) >= 20 }, 10*time.Second, time.Millisecond)
	a.end()
	atEnd := len(a.reached())
	close(ended)
	wg.Wait()
	assert.Zero(t, okAfter, "a request sent after the end succeeded")
	assert.LessOrEqual(t, len(a.reached())-atEnd, workers, "more calls after the end than requests in flight")
}
