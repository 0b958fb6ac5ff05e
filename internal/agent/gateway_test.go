package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/gateway"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// gwHost is a host reached only through its TLS gateway: one invocation's
// real hostsock server behind a real gateway, the fake provider behind it.
type gwHost struct {
	g      *gateway.Gateway
	llm    *fakellm.Server
	caller domain.Caller
	cred   string
	end    func()
	mu     sync.Mutex
	ipc    []string // "group op" of each IPC call that reached the host
}

func newGWHost(t *testing.T) *gwHost {
	t.Helper()
	h := &gwHost{llm: fakellm.New(), caller: domain.Caller{Group: "team", ChatID: -100, Run: "r1"}}
	t.Cleanup(h.llm.Close)
	h.llm.SetRequiredKey("host-key")
	g, err := gateway.Listen("127.0.0.1:0", gateway.Config{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	h.g = g
	s, err := hostsock.New(h.caller, hostsock.Config{
		Anthropic: hostsock.Upstream{BaseURL: h.llm.URL(), APIKey: "host-key"},
		Model:     "claude-test",
		IPC: func(_ context.Context, c domain.Caller, op string, _ []byte) (int, any) {
			h.mu.Lock()
			h.ipc = append(h.ipc, c.Group+" "+op)
			h.mu.Unlock()
			return 200, map[string]bool{"ok": true}
		},
	})
	require.NoError(t, err)
	h.cred, h.end, err = g.Register(s)
	require.NoError(t, err)
	t.Cleanup(func() { h.end(); _ = s.Close() })
	return h
}

func (h *gwHost) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ipc...)
}

func (h *gwHost) gateway() *agent.Gateway {
	return &agent.Gateway{URL: "https://" + h.g.Addr().String(), CACert: h.g.CACert(), Credential: h.cred}
}

// TestRunThroughGateway runs the agent with no host socket at all: the
// model and the IPC calls go through the gateway, and reach the host as
// the invocation the credential was made for.
func TestRunThroughGateway(t *testing.T) {
	h := newGWHost(t)
	root := t.TempDir()
	opts := agent.Options{
		WorkspaceDir: filepath.Join(root, "group"), GlobalDir: filepath.Join(root, "global"), HomeDir: filepath.Join(root, "home"),
		SocketPath: filepath.Join(root, "no-such.sock"),
		Gateway:    h.gateway(),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, d := range []string{opts.WorkspaceDir, opts.GlobalDir, opts.HomeDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	out, err := agent.Run(context.Background(), testJob(`TOOL send_message {"text":"hello"}`), opts)
	require.NoError(t, err)
	assert.Contains(t, out, "results:")
	assert.Equal(t, []string{"team send_message"}, h.calls())
	reqs := h.llm.Requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[0].Header.Get(gateway.CredentialHeader), "the credential stays at the gateway")

	// A gateway whose certificate names another host than the URL's.
	named, err := gateway.Listen("127.0.0.1:0", gateway.Config{Hosts: []string{"gateway.clawpen"}})
	require.NoError(t, err)
	defer named.Close()
	opts.Gateway = &agent.Gateway{URL: "https://" + named.Addr().String(), CACert: named.CACert(), Credential: h.cred}
	_, err = agent.Run(context.Background(), testJob("hi"), opts)
	require.Error(t, err)
	assert.Len(t, h.llm.Requests(), 2, "nothing reached the host")
}

// TestGatewayClientRefusals: the agent's client does not talk to a server
// its CA did not sign (the credential is never sent there), and an ended
// invocation's credential gets the gateway's refusal.
func TestGatewayClientRefusals(t *testing.T) {
	h := newGWHost(t)
	impostor := newGWHost(t)
	gw := h.gateway()
	gw.URL = "https://" + impostor.g.Addr().String() // same name, another CA
	c, err := agent.GatewayClient(*gw)
	require.NoError(t, err)
	_, err = c.Post("http://clawpen/ipc/list_tasks", "application/json", strings.NewReader("{}"))
	require.Error(t, err)
	assert.Empty(t, impostor.calls())

	c, err = agent.GatewayClient(*h.gateway())
	require.NoError(t, err)
	res, err := c.Post("http://clawpen/ipc/list_tasks", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	h.end()
	res, err = c.Post("http://clawpen/ipc/list_tasks", "application/json", strings.NewReader("{}"))
	if err == nil { // the cut connection may be found on the way, or the new one refused
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
		assert.Contains(t, string(b), "denied: ")
	}
	assert.Equal(t, []string{"team list_tasks"}, h.calls())

	for _, bad := range []agent.Gateway{
		{URL: "http://127.0.0.1:1", CACert: h.g.CACert(), Credential: "x"},
		{URL: "https://127.0.0.1:1/?credential=x", CACert: h.g.CACert(), Credential: "x"},
		{URL: "https://127.0.0.1:1", CACert: []byte("no pem"), Credential: "x"},
		{URL: "https://127.0.0.1:1", CACert: h.g.CACert()},
	} {
		_, err := agent.GatewayClient(bad)
		assert.Error(t, err, bad.URL)
	}
}

func TestGatewayFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	cred := filepath.Join(dir, "cred")
	require.NoError(t, os.WriteFile(ca, []byte("pem"), 0o600))
	require.NoError(t, os.WriteFile(cred, []byte("secret\n"), 0o600))
	env := map[string]string{}
	get := func(k string) string { return env[k] }

	gw, err := agent.GatewayFromEnv(get)
	require.NoError(t, err)
	assert.Nil(t, gw, "no gateway: the host socket")

	env[agent.GatewayURLEnv] = "https://gw:8443"
	_, err = agent.GatewayFromEnv(get)
	assert.Error(t, err, "a gateway without CA and credential")
	env[agent.GatewayCAEnv] = ca
	env[agent.GatewayCredentialEnv] = filepath.Join(dir, "missing")
	_, err = agent.GatewayFromEnv(get)
	assert.Error(t, err)
	env[agent.GatewayCredentialEnv] = cred
	gw, err = agent.GatewayFromEnv(get)
	require.NoError(t, err)
	assert.Equal(t, agent.Gateway{URL: "https://gw:8443", CACert: []byte("pem"), Credential: "secret"}, *gw)
}

// TestEgressThroughGateway: the sandbox's proxy port relays through the
// gateway with the credential added: plain HTTP and CONNECT reach what
// the profile allows, the destination never sees the credential, and a
// credential header the client adds of its own is refused.
func TestEgressThroughGateway(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		_, _ = io.WriteString(w, "fetched")
	}))
	defer up.Close()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	upAddr := strings.TrimPrefix(up.URL, "http://")

	g, err := gateway.Listen("127.0.0.1:0", gateway.Config{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	defer g.Close()
	s, err := hostsock.New(domain.Caller{Group: "team", Run: "r1"}, hostsock.Config{
		Profile: domain.Profile{Name: "web", Network: domain.NetworkAllowlist, Egress: []string{upAddr, echo.Addr().String()}},
	})
	require.NoError(t, err)
	defer s.Close()
	cred, end, err := g.Register(s)
	require.NoError(t, err)
	defer end()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	gw := agent.Gateway{URL: "https://" + g.Addr().String(), CACert: g.CACert(), Credential: cred}
	require.NoError(t, agent.StartEgressGateway(t.Context(), ln, gw, slog.New(slog.DiscardHandler)))

	proxy := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}}
	res, err := c.Get(up.URL + "/x")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	assert.Equal(t, "fetched", string(body))
	mu.Lock()
	require.Len(t, seen, 1)
	assert.Empty(t, seen[0].Values(gateway.CredentialHeader))
	mu.Unlock()

	tun, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer tun.Close()
	_, err = fmt.Fprintf(tun, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo.Addr(), echo.Addr())
	require.NoError(t, err)
	br := bufio.NewReader(tun)
	tr, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, tr.StatusCode)
	_, err = io.WriteString(tun, "ping\n")
	require.NoError(t, err)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "ping\n", line)

	// A client that names a credential itself (another invocation's, say).
	own, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer own.Close()
	_, err = fmt.Fprintf(own, "GET %s/y HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n\r\n", up.URL, upAddr, gateway.CredentialHeader, strings.Repeat("A", 43))
	require.NoError(t, err)
	or, err := http.ReadResponse(bufio.NewReader(own), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, or.StatusCode)
	mu.Lock()
	assert.Len(t, seen, 1, "the request with a second credential reached nothing")
	mu.Unlock()
}
