package hostsock

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
)

// The egress proxy (DESIGN.md, "Egress proxy"): clawpen-agent relays each
// TCP connection made to the sandbox's 127.0.0.1:3128 to a new connection
// on this socket, where it arrives as an ordinary proxy request: CONNECT
// host:port, or an absolute-form http:// request. Each is checked against
// the run's profile (egress_policy.go), dialled from the host to exactly
// the address the host resolved, and then carried as bytes: the host never
// interprets what comes back.

// EgressLimits bound one run's egress. Zero fields take the defaults.
type EgressLimits struct {
	MaxConns    int           // connections open at once
	MaxTotal    int           // connections in the whole run
	MaxBytes    int64         // bytes both ways, summed over the run; past it every transfer is cut
	DialTimeout time.Duration // to resolve and connect
}

// DefaultEgressLimits are the egress limits of a socket whose Config
// leaves them zero. MaxBytes is CLAWPEN_EGRESS_MB's default.
var DefaultEgressLimits = EgressLimits{
	MaxConns:    64,
	MaxTotal:    1024,
	MaxBytes:    1024 << 20,
	DialTimeout: 10 * time.Second,
}

func (l EgressLimits) withDefaults() EgressLimits {
	d := DefaultEgressLimits
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = d.MaxTotal
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.DialTimeout <= 0 {
		l.DialTimeout = d.DialTimeout
	}
	return l
}

// maxEgressAudited is how many egress decisions of one run are each written
// to the audit log; the rest are counted and written as one entry when the
// socket closes, so that a sandbox cannot flood the log.
const maxEgressAudited = 64

// egress is one socket's egress proxy.
type egress struct {
	s        *Server
	policy   egressPolicy
	ask      func(ctx context.Context, host string, port int) (string, error) // egress_ask: nil when off
	lim      EgressLimits
	resolver Resolver
	own      func() ([]netip.Addr, error)
	open     *semaphore.Weighted
	total    atomic.Int64
	budget   atomic.Int64 // bytes left
	cutOnce  sync.Once
	// Credential injection (inject.go): the run's credentials and CA (nil
	// without credentials), the variables they name, the roots upstreams
	// are verified against (nil: the system's); guard refuses requests
	// that carry a secret of the host's.
	creds  []domain.Credential
	ca     *runCA
	getenv func(string) string
	roots  *x509.CertPool
	guard  *leakguard.Guard

	mu         sync.Mutex
	conns      map[net.Conn]struct{} // open connections, both sides: Close cuts them
	closed     bool
	audited    int
	suppressed map[string]int // decision → how many past maxEgressAudited
}

func newEgress(s *Server, cfg Config) *egress {
	lim := cfg.Egress.withDefaults()
	e := &egress{s: s, lim: lim, resolver: cfg.Resolver, open: semaphore.NewWeighted(int64(lim.MaxConns)),
		conns: map[net.Conn]struct{}{}, suppressed: map[string]int{}}
	if e.resolver == nil {
		e.resolver = net.DefaultResolver
	}
	if e.own = cfg.HostAddrs; e.own == nil {
		e.own = interfaceAddrs
	}
	if cfg.Profile.EgressAsk {
		e.ask = cfg.AskEgress
	}
	e.budget.Store(lim.MaxBytes)
	e.getenv, e.roots, e.guard = cfg.Getenv, cfg.UpstreamRoots, cfg.Guard
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	var errs []error
	e.policy, errs = newEgressPolicy(cfg.Profile.HasNetwork(), cfg.Profile.Egress)
	for _, err := range errs {
		s.log.Error("egress entry ignored; it allows nothing", "err", err)
	}
	return e
}

// interfaceAddrs lists the addresses of the host's network interfaces as
// they are at this moment (one netlink dump, about 0.1 ms): read at each
// decision rather than cached, since they change (DHCP, docker0, a VPN
// coming up), so that what is checked is what the host has when it dials.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// isEgress reports whether r is a proxy request rather than one of the
// socket's own routes (which are always origin-form, /path).
func isEgress(r *http.Request) bool {
	return r.Method == http.MethodConnect || !strings.HasPrefix(r.RequestURI, "/")
}

// serve answers one proxy request.
func (e *egress) serve(w http.ResponseWriter, r *http.Request) {
	connect := r.Method == http.MethodConnect
	// One proxy request per connection, whatever its answer: a connection
	// kept alive after it would hold one of the socket's connections while
	// counted nowhere as egress, and enough of them would leave the agent's
	// model requests and IPC calls waiting to be accepted. So an egress
	// connection lasts exactly as long as it holds an egress slot (or as its
	// refusal takes), and the rest of the socket's connections stay theirs.
	w.Header().Set("Connection", "close")
	t, err := e.target(r)
	if err != nil {
		named := r.RequestURI
		if !connect && r.URL.Host != "" {
			named = r.URL.Host
		}
		e.refuse(w, connect, http.StatusForbidden, named, err.Error())
		return
	}
	if !e.policy.network {
		e.refuse(w, connect, http.StatusForbidden, t.String(), "this group's sandbox profile has no network")
		return
	}
	if reason := e.secretIn(r); reason != "" {
		e.refuse(w, connect, http.StatusForbidden, t.String(), reason)
		return
	}
	creds := e.credentialsFor(t)
	if err := strictTarget(r, creds); err != nil && connect {
		e.refuse(w, connect, http.StatusForbidden, quoteTarget(r.RequestURI), err.Error())
		return
	}
	if !e.open.TryAcquire(1) {
		e.refuse(w, connect, http.StatusTooManyRequests, t.String(), fmt.Sprintf("more than %d egress connections at once in this run", e.lim.MaxConns))
		return
	}
	defer e.open.Release(1)
	if n := e.total.Add(1); n > int64(e.lim.MaxTotal) {
		e.refuse(w, connect, http.StatusTooManyRequests, t.String(), fmt.Sprintf("more than %d egress connections in this run", e.lim.MaxTotal))
		return
	}
	if e.budget.Load() <= 0 {
		e.refuse(w, connect, http.StatusForbidden, t.String(), e.capReason())
		return
	}

	addrs, rule, err := e.decide(r.Context(), t)
	if err != nil {
		var d *denial
		if errors.As(err, &d) {
			e.refuse(w, connect, http.StatusForbidden, t.String(), d.reason)
		} else {
			e.fail(w, connect, t.String(), err.Error())
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), e.lim.DialTimeout)
	up, err := e.dial(ctx, addrs, t.Port)
	cancel()
	if err != nil {
		e.fail(w, connect, t.String(), err.Error())
		return
	}
	e.record("allow", t.String(), fmt.Sprintf("%s %s: allowed by %q, connected to %s", requestKind(connect), t, rule.text, up.RemoteAddr()))
	switch {
	case connect && len(creds) > 0:
		e.intercept(w, up, addrs, t, creds)
	case connect:
		e.tunnel(w, up)
	default:
		e.forward(w, r, t, up)
	}
}

// secretIn says why r, as far as the host reads it (the request line and
// headers; a plain request's body is read as it is forwarded), may not
// leave: a secret of the host's in it. The CONNECT target counts, since
// the host resolves it: a name is a DNS query.
func (e *egress) secretIn(r *http.Request) string {
	var head bytes.Buffer
	head.WriteString(r.Method + " " + r.RequestURI + "\r\n")
	_ = r.Header.Write(&head)
	if f := e.guard.Scan(head.Bytes()); f.Found() {
		return "secret in request (" + f.String() + ")"
	}
	return ""
}

func requestKind(connect bool) string {
	if connect {
		return "CONNECT"
	}
	return "HTTP"
}

// target is where r asks to go, with its port: CONNECT names host:port;
// an absolute URL names http://host[:port] (port 80 by default).
func (e *egress) target(r *http.Request) (egressTarget, error) {
	if r.Method == http.MethodConnect {
		// A CONNECT to a path (the socket's own, any unix path) is not
		// host:port, whatever the server's parser made of it.
		if strings.HasPrefix(r.RequestURI, "/") || r.URL.Host == "" || r.URL.Host != r.RequestURI {
			return egressTarget{}, errors.New("CONNECT wants host:port, not a path")
		}
		t, err := parseAuthority(r.RequestURI)
		if err == nil && t.Port == 0 {
			err = errors.New("CONNECT wants host:port, with the port")
		}
		return t, err
	}
	if r.URL.Scheme != "http" {
		if r.URL.Scheme == "https" {
			return egressTarget{}, errors.New("https:// URLs go through CONNECT, not as plain requests")
		}
		return egressTarget{}, fmt.Errorf("scheme %q: only http:// requests and CONNECT are proxied", r.URL.Scheme)
	}
	t, err := parseAuthority(r.URL.Host)
	if err == nil && t.Port == 0 {
		t.Port = 80
	}
	return t, err
}

// dial connects to the first of addrs that answers: all were checked.
func (e *egress) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var d net.Dialer
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return e.track(&meteredConn{Conn: c, e: e}), nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("cannot connect: %w", errors.Join(errs...))
}

// tunnel answers 200 and then carries bytes both ways until either side
// ends, when it closes both: nothing after the tunnel is ever read as a
// request (no smuggling).
func (e *egress) tunnel(w http.ResponseWriter, up net.Conn) {
	defer e.untrack(up)
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		e.s.log.Error("egress: take over the connection", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot open a tunnel")
		return
	}
	e.track(c)
	defer e.untrack(c)
	_ = c.SetDeadline(time.Time{}) // the server's header deadline must not cut the tunnel
	if _, err := brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	// brw.Reader first: bytes the client sent right behind its request
	// (a TLS hello) are already buffered there.
	go func() { _, _ = io.Copy(up, brw.Reader); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// forward sends one absolute-form request to the connection already made,
// and its answer back as data: hop-by-hop and Proxy-* headers dropped,
// redirects passed to the sandbox, never followed. The connection serves
// this request only; the next one on the socket is checked again.
func (e *egress) forward(w http.ResponseWriter, r *http.Request, t egressTarget, up net.Conn) {
	defer e.untrack(up)
	var once sync.Once
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			var c net.Conn
			once.Do(func() { c = up })
			if c == nil {
				return nil, errors.New("one connection per checked request")
			}
			return c, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		ResponseHeaderTimeout:  2 * time.Minute,
	}
	// An upgrade would turn this request into a tunnel the check never saw.
	r.Header.Del("Upgrade")
	body := &guardedBody{r: e.guard.Reader(r.Body), c: r.Body}
	r.Body = body
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host, out.URL.User = "http", t.String(), nil
			out.Host = t.String()
			for k := range out.Header {
				if strings.HasPrefix(k, "Proxy-") {
					out.Header.Del(k)
				}
			}
			out.Header.Del("Upgrade")
		},
		Transport:      tr,
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(e.s.log.Handler(), slog.LevelDebug), // a cut transfer is recorded once, by cut
		ModifyResponse: func(*http.Response) error { return body.secret() },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if serr := body.secret(); serr != nil {
				e.record("deny", t.String(), fmt.Sprintf("HTTP %s: secret in request (%s)", t, leakguard.How(serr)))
				writeError(w, http.StatusForbidden, "denied: secret in request")
				return
			}
			if r.Context().Err() == nil {
				writeError(w, http.StatusBadGateway, fmt.Sprintf("%s: %v", t, errors.Unwrap(err)))
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// refuse answers a denial ({"error":"denied: reason"}, for CONNECT also in
// the status line) and records it.
func (e *egress) refuse(w http.ResponseWriter, connect bool, status int, target, reason string) {
	e.record("deny", quoteTarget(target), fmt.Sprintf("%s %s: %s", requestKind(connect), quoteTarget(target), reason))
	e.answer(w, connect, status, "denied: "+reason)
}

// fail answers a destination that could not be reached (502) and records it.
func (e *egress) fail(w http.ResponseWriter, connect bool, target, msg string) {
	e.record("error", quoteTarget(target), fmt.Sprintf("%s %s: %s", requestKind(connect), quoteTarget(target), msg))
	e.answer(w, connect, http.StatusBadGateway, msg)
}

func (e *egress) answer(w http.ResponseWriter, connect bool, status int, msg string) {
	if !connect {
		writeError(w, status, msg)
		return
	}
	// A CONNECT client often shows only the status line (curl, Python's
	// "Tunnel connection failed: ..."): it says why, too.
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, status, msg)
		return
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]string{"error": msg})
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, statusText(msg), len(body)+1, append(body, '\n'))
	_ = brw.Flush()
}

// statusText makes msg fit a status line: printable ASCII, bounded.
func statusText(msg string) string {
	b := []byte(msg)
	for i, c := range b {
		if c < ' ' || c >= 0x7f {
			b[i] = '?'
		}
	}
	if len(b) > 200 {
		b = append(b[:197], "..."...)
	}
	return string(b)
}

// quoteTarget writes what the sandbox named, which may be anything, so that
// it cannot forge audit lines.
func quoteTarget(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	q := strconv.Quote(s)
	if q == `"`+s+`"` {
		return s
	}
	return q
}

// record writes one egress decision about target (as the sandbox named it,
// quoted when odd; "" for the run as a whole) to the log and the audit log;
// past maxEgressAudited a run's decisions are counted instead (see close).
func (e *egress) record(decision, target, reason string) {
	// What the sandbox named may hold a secret of the host's (a refused
	// request's path or host name): the log never does.
	target, _ = e.guard.Redact(target)
	reason, _ = e.guard.Redact(reason)
	e.mu.Lock()
	e.audited++
	first := e.audited <= maxEgressAudited
	if !first {
		e.suppressed[decision]++
	}
	e.mu.Unlock()
	if decision == "allow" {
		e.s.log.Info("egress", "decision", decision, "reason", reason)
	} else {
		e.s.log.Warn("egress", "decision", decision, "reason", reason)
	}
	if first {
		e.s.auditDecision("egress", decision, target, reason)
	}
}

// close cuts every open egress connection and records the decisions left
// uncounted, one row for each decision (allowed ones under "allow").
func (e *egress) close() {
	e.mu.Lock()
	e.closed = true
	conns := e.conns
	e.conns = map[net.Conn]struct{}{}
	n := e.suppressed
	e.suppressed = map[string]int{}
	e.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	for _, d := range []struct{ decision, verb string }{{"allow", "allowed"}, {"deny", "refused"}, {"error", "failed"}} {
		if n[d.decision] > 0 {
			e.s.auditDecision("egress", d.decision, "", fmt.Sprintf("%d more egress requests %s in this run, not recorded one by one", n[d.decision], d.verb))
		}
	}
}

func (e *egress) track(c net.Conn) net.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = c.Close()
		return c
	}
	e.conns[c] = struct{}{}
	return c
}

func (e *egress) untrack(c net.Conn) {
	_ = c.Close()
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
}

// cut ends every transfer once the run's bytes are spent.
func (e *egress) cut() {
	e.cutOnce.Do(func() {
		e.record("deny", "", e.capReason()+"; open transfers cut")
		e.mu.Lock()
		conns := make([]net.Conn, 0, len(e.conns))
		for c := range e.conns {
			conns = append(conns, c)
		}
		e.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
}

func (e *egress) capReason() string {
	return fmt.Sprintf("egress byte cap of %d MiB for this run reached", e.lim.MaxBytes>>20)
}

// errByteCap ends a transfer past the run's byte cap.
var errByteCap = errors.New("egress byte cap reached")

// meteredConn counts every byte to and from a destination against the
// run's budget, and never moves one past it.
type meteredConn struct {
	net.Conn
	e *egress
}

func (c *meteredConn) Read(p []byte) (int, error) {
	left := c.e.budget.Load()
	if left <= 0 {
		c.e.cut()
		return 0, errByteCap
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	if c.e.budget.Add(-int64(n)) <= 0 {
		c.e.cut()
	}
	return n, err
}

func (c *meteredConn) Write(p []byte) (int, error) {
	left := c.e.budget.Load()
	if left <= 0 {
		c.e.cut()
		return 0, errByteCap
	}
	short := int64(len(p)) > left
	if short {
		p = p[:left]
	}
	n, err := c.Conn.Write(p)
	if c.e.budget.Add(-int64(n)) <= 0 {
		c.e.cut()
	}
	if err == nil && short {
		err = errByteCap
	}
	return n, err
}

// ReadFrom and WriteTo are hidden so that io.Copy uses Read and Write,
// which count (a splice would move bytes past the meter).
func (c *meteredConn) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{c}, r)
}

func (c *meteredConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}

// auditDecision records one decision in the audit log.
func (s *Server) auditDecision(op, decision, target, reason string) {
	if s.cfg.Audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.cfg.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: s.caller.Group, Operation: op, Target: target, Decision: decision, Reason: reason})
	if err != nil {
		s.log.Error("write audit log", "err", err)
	}
}
