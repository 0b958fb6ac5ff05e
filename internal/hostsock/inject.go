package hostsock

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
)

// Credential injection (DESIGN.md, "Credentials for outside services"): a
// CONNECT to a host the run's profile holds a credential for is not a
// tunnel. The host answers the TLS handshake itself with a leaf of the
// run's CA, reads each request (HTTP/1.1, keep-alive request by request,
// or HTTP/2), drops any header of the credential's name the sandbox sent,
// sets the credential, and forwards the request over TLS that the host
// verifies against its own roots, to the address it checked. Everything
// about which host is meant must agree exactly, or nothing is forwarded:
// the CONNECT target as written, the TLS server name, and each request's
// Host.

// credentialsFor lists the credentials for t (whose port is set).
func (e *egress) credentialsFor(t egressTarget) []domain.Credential {
	var out []domain.Credential
	for _, c := range e.creds {
		if c.Authority() == t.String() {
			out = append(out, c)
		}
	}
	return out
}

// strictTarget refuses a CONNECT that names a credential host other than
// exactly as the profile writes it (upper case, a trailing dot): the host
// decides what to inject for from one spelling only.
func strictTarget(r *http.Request, creds []domain.Credential) error {
	if len(creds) > 0 && r.RequestURI != creds[0].Authority() {
		return fmt.Errorf("credentials are injected for %s only when it is named exactly so (lower case, no trailing dot)", creds[0].Authority())
	}
	return nil
}

// intercept serves the tunnel to t as the credential host's end of TLS,
// up being the connection to it the host already made (to addrs, checked).
func (e *egress) intercept(w http.ResponseWriter, up net.Conn, addrs []netip.Addr, t egressTarget, creds []domain.Credential) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		e.untrack(up)
		e.s.log.Error("egress: take over the connection", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot open a tunnel")
		return
	}
	e.track(c)
	defer e.untrack(c)
	_ = c.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err != nil || brw.Flush() != nil {
		e.untrack(up)
		return
	}
	host := creds[0].Host
	leaf := e.ca.leaves[host]
	_, ipErr := netip.ParseAddr(host)
	tc := tls.Server(&bufferedConn{Conn: c, r: brw.Reader}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// A name host is asked for by exactly its name; an address,
			// for which TLS has no server name, by none.
			if ipErr == nil && hello.ServerName != "" || ipErr != nil && hello.ServerName != host {
				e.record("deny", t.String(), fmt.Sprintf("CONNECT %s: TLS server name %q is not %s; no credential, connection closed", t, quoteTarget(hello.ServerName), host))
				return nil, errors.New("server name does not match the CONNECT target")
			}
			return leaf, nil
		},
	})
	fwd := e.forwarder(up, addrs, t, creds)
	defer fwd.close()
	ln := newOneConnListener(tc)
	srv := &http.Server{
		Handler:           fwd,
		ReadHeaderTimeout: e.s.lim.HeaderTimeout,
		MaxHeaderBytes:    e.s.lim.MaxHeaderBytes,
		IdleTimeout:       e.s.lim.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(e.s.log.Handler(), slog.LevelDebug),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.Close()
			}
		},
	}
	_ = srv.Serve(ln) // the one connection's requests, HTTP/1.1 or HTTP/2, until it closes
	_ = srv.Close()
}

// injector forwards one intercepted tunnel's requests.
type injector struct {
	e     *egress
	t     egressTarget
	creds []domain.Credential
	hosts []string // the Host values a request may carry
	proxy *httputil.ReverseProxy
	tr    *http.Transport

	mu    sync.Mutex // guards first
	first net.Conn   // the CONNECT's upstream connection until the transport takes it
}

func (e *egress) forwarder(up net.Conn, addrs []netip.Addr, t egressTarget, creds []domain.Credential) *injector {
	in := &injector{e: e, t: t, creds: creds, hosts: []string{t.String()}}
	if t.Port == 443 {
		h := t.Host
		if t.IP.IsValid() {
			h = egressTarget{IP: t.IP}.String()
		}
		in.hosts = append(in.hosts, h)
	}
	in.first = up
	in.tr = &http.Transport{
		// The first connection is the one made for the CONNECT; another
		// (HTTP/1.1 after the upstream closed one) goes to the same checked
		// addresses, never through a new lookup. Each leaves the run's
		// tracked connections when the transport closes it.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			in.mu.Lock()
			c := in.first
			in.first = nil
			in.mu.Unlock()
			if c == nil {
				var err error
				if c, err = e.dial(ctx, addrs, t.Port); err != nil {
					return nil, err
				}
			}
			return &untrackOnClose{Conn: c, e: e}, nil
		},
		TLSClientConfig:        &tls.Config{RootCAs: e.roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxConnsPerHost:        1,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		ResponseHeaderTimeout:  2 * time.Minute,
		TLSHandshakeTimeout:    e.lim.DialTimeout,
	}
	in.proxy = &httputil.ReverseProxy{
		Rewrite:       in.rewrite,
		Transport:     in.tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(e.s.log.Handler(), slog.LevelDebug),
		ModifyResponse: func(resp *http.Response) error {
			if err := bodyOf(resp.Request).secret(); err != nil {
				return err
			}
			in.audit(resp.Request, resp.StatusCode, "")
			return nil
		},
		ErrorHandler: in.failed,
	}
	return in
}

// close ends the tunnel's upstream connections, the first one too when no
// request used it.
func (in *injector) close() {
	in.tr.CloseIdleConnections()
	in.mu.Lock()
	c := in.first
	in.first = nil
	in.mu.Unlock()
	if c != nil {
		in.e.untrack(c)
	}
}

// untrackOnClose is an upstream connection of an intercepted tunnel: its
// Close also takes it off the run's tracked connections.
type untrackOnClose struct {
	net.Conn
	e *egress
}

func (c *untrackOnClose) Close() error {
	c.e.untrack(c.Conn)
	return nil
}

// credentialValues is the context key of the credentials' values, read
// once per request in ServeHTTP and set in rewrite.
type credentialValues struct{}

func (in *injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if reason := in.check(r); reason != "" {
		in.e.record("deny", in.t.String(), fmt.Sprintf("%s https://%s%s: %s", r.Method, in.t, quoteTarget(r.URL.Path), reason))
		writeError(w, http.StatusForbidden, "denied: "+reason)
		return
	}
	values := make([]string, len(in.creds))
	for i, c := range in.creds {
		v, err := c.Expand(in.e.getenv)
		if err != nil {
			msg := fmt.Sprintf("credential %s for %s: %v", c.Header, c.Authority(), err)
			in.e.record("error", in.t.String(), fmt.Sprintf("%s https://%s%s: %s", r.Method, in.t, quoteTarget(r.URL.Path), msg))
			writeError(w, http.StatusBadGateway, msg)
			return
		}
		values[i] = v
	}
	// Read as it is forwarded: a secret in the body ends the request
	// before any byte of it is sent (leakguard.Reader), and whatever the
	// upstream made of the cut request, the sandbox is told it was refused.
	body := &guardedBody{r: in.e.guard.Reader(r.Body), c: r.Body}
	r.Body = body
	ctx := context.WithValue(r.Context(), credentialValues{}, values)
	in.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, guardedBody{}, body)))
}

// check says why r may not be forwarded, or "".
func (in *injector) check(r *http.Request) string {
	switch {
	case r.Method == http.MethodConnect:
		return "CONNECT inside an intercepted tunnel"
	case r.RequestURI == "" || r.RequestURI[0] != '/' || r.URL.IsAbs():
		return "requests in this tunnel name a path only"
	case !slices.Contains(in.hosts, r.Host):
		return fmt.Sprintf("Host %s is not %s, the host this tunnel was opened for", quoteTarget(r.Host), in.t)
	case r.Header.Get("Upgrade") != "":
		return "protocol upgrades are not carried in an intercepted tunnel"
	}
	// The sandbox's own header of the credential's name is dropped, not
	// looked at: a secret in it never leaves.
	h := r.Header.Clone()
	for _, c := range in.creds {
		h.Del(c.Header)
	}
	var head bytes.Buffer
	head.WriteString(r.Method + " " + r.RequestURI + "\r\n")
	_ = h.Write(&head)
	if f := in.e.guard.Scan(head.Bytes()); f.Found() {
		return "secret in request (" + f.String() + ")"
	}
	return ""
}

// rewrite addresses the upstream and sets the credentials; the sandbox's
// headers of those names are dropped first, so none is ever doubled.
func (in *injector) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme, out.URL.Host, out.URL.User = "https", in.t.String(), nil
	out.Host = pr.In.Host
	for k := range out.Header {
		if len(k) > 6 && k[:6] == "Proxy-" {
			out.Header.Del(k)
		}
	}
	for _, c := range in.creds {
		out.Header.Del(c.Header)
	}
	values, _ := pr.In.Context().Value(credentialValues{}).([]string)
	for i, c := range in.creds {
		if i < len(values) {
			out.Header.Add(c.Header, values[i])
		}
	}
}

// failed answers a request that could not be forwarded: 403 when its body
// carried a secret, 502 otherwise.
func (in *injector) failed(w http.ResponseWriter, r *http.Request, err error) {
	if serr := bodyOf(r).secret(); serr != nil || errors.Is(err, leakguard.ErrSecret) {
		if serr == nil {
			serr = err
		}
		reason := "secret in request (" + leakguard.How(serr) + ")"
		in.e.record("deny", in.t.String(), fmt.Sprintf("%s https://%s%s: %s", r.Method, in.t, quoteTarget(r.URL.Path), reason))
		writeError(w, http.StatusForbidden, "denied: secret in request")
		return
	}
	in.audit(r, http.StatusBadGateway, err.Error())
	if r.Context().Err() == nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("%s: %v", in.t, err))
	}
}

// audit records one forwarded request: host, method, path, status; never
// the credential's value nor the query.
func (in *injector) audit(r *http.Request, status int, failure string) {
	names := make([]string, len(in.creds))
	for i, c := range in.creds {
		names[i] = c.Header
	}
	reason := fmt.Sprintf("%s https://%s%s: credential %s injected, answered %s", r.Method, in.t, quoteTarget(r.URL.Path), names, strconv.Itoa(status))
	decision := "allow"
	if failure != "" {
		decision, reason = "error", fmt.Sprintf("%s https://%s%s: failed (credential %s): %s", r.Method, in.t, quoteTarget(r.URL.Path), names, failure)
	}
	in.e.record(decision, in.t.String(), reason)
}

// guardedBody is a request body read through the leak guard; it keeps
// the guard's refusal, which the transport may report as a broken
// connection, or not at all when the upstream answered first.
type guardedBody struct {
	r   io.Reader
	c   io.Closer
	mu  sync.Mutex
	err error // wraps leakguard.ErrSecret once seen
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, leakguard.ErrSecret) {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return n, err
}

func (b *guardedBody) Close() error { return b.c.Close() }

func (b *guardedBody) secret() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// bodyOf is the guarded body of a request ServeHTTP forwarded, or nil.
func bodyOf(r *http.Request) *guardedBody {
	b, _ := r.Context().Value(guardedBody{}).(*guardedBody)
	return b
}

// bufferedConn reads what its reader already buffered (the client's TLS
// hello, sent right behind its CONNECT) before the connection.
type bufferedConn struct {
	net.Conn
	r interface{ Read([]byte) (int, error) }
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConnListener hands out one connection, then waits until closed.
type oneConnListener struct {
	c    chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{c: make(chan net.Conn, 1), done: make(chan struct{}), addr: c.LocalAddr()}
	l.c <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }
