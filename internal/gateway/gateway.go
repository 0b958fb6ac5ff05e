// Package gateway serves the host socket's routes over TLS, for sandboxes
// that cannot be handed a unix socket because they run on another machine
// (DESIGN.md, "Outgrowing one machine (cluster mode)"). A unix socket tells
// the host whose connection it is by the socket it was accepted on; every
// invocation reaches the gateway on one port, so the gateway tells them
// apart by a credential instead: made for one invocation when the host
// registers it, presented in CredentialHeader on every request, and refused
// once the invocation ended. The address a connection comes from is never
// used to identify it.
//
// What an invocation reaches is its own hostsock.Server, made with
// hostsock.New: the same routes, the same refusals and the same limits on
// bodies and bytes in flight as on its socket. The gateway holds what a
// socket's listener held: the connections of each invocation
// (Server.MaxConns) and the size and time of request headers.
package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// CredentialHeader carries an invocation's credential. Only this header is
// read: a credential elsewhere (a query string, which proxies and logs
// keep) is not one. The gateway removes it before the request reaches the
// invocation's server, so it is never forwarded to a model provider or an
// egress destination.
const CredentialHeader = domain.GatewayCredentialHeader

// credentialBytes is the credential's randomness: 256 bits.
const credentialBytes = 32

// credentialLen is the length of a credential as text (unpadded base64url).
var credentialLen = base64.RawURLEncoding.EncodedLen(credentialBytes)

// Defaults of a Config.
const (
	DefaultMaxUnbound = 128
	// DefaultValidity is how long the gateway's certificate is valid: a
	// host that runs longer must be restarted (its sandboxes do not
	// survive that either, so no invocation holds an old CA).
	DefaultValidity = 397 * 24 * time.Hour
)

// Config configures a gateway.
type Config struct {
	// Hosts are the names and addresses sandboxes dial the gateway by; its
	// certificate is made for exactly these, by a CA that can sign nothing
	// else (hostsock.NewServerIdentity).
	Hosts []string
	// Limits give the header size and the header, idle and TLS handshake
	// timeouts of every connection, before it is known whose it is (zero
	// fields: hostsock.DefaultLimits). Each invocation's own server applies
	// its limits to bodies and bytes in flight.
	Limits hostsock.Limits
	// MaxUnbound is how many connections may be open at once that have not
	// yet presented a valid credential (default DefaultMaxUnbound); more
	// wait in the kernel's backlog. Each lasts at most the TLS handshake and
	// header timeout: a request without a valid credential closes it.
	MaxUnbound int
	Validity   time.Duration // of the certificate; default DefaultValidity
	Logger     *slog.Logger
}

// Handler is what an invocation's connections are served by: its
// hostsock.Server.
type Handler interface {
	http.Handler
	MaxConns() int
	Caller() domain.Caller
}

// Gateway is one TLS listener for every registered invocation.
type Gateway struct {
	log     *slog.Logger
	caPEM   []byte
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	closing chan struct{} // closed when Close begins
	unbound chan struct{} // a slot for each connection not yet bound
	logRate *rate.Limiter // refusals written to the log

	mu         sync.Mutex
	invs       map[[sha256.Size]byte]*invocation // by the credential's hash
	suppressed int                               // refusals not logged since the last one that was
	closed     bool
}

// Listen serves the gateway on addr (host:port) until Close.
func Listen(addr string, cfg Config) (*Gateway, error) {
	// Zero means the default; the fields are set by the host's own code.
	lim, d := cfg.Limits, hostsock.DefaultLimits
	lim.MaxHeaderBytes = cmp.Or(lim.MaxHeaderBytes, d.MaxHeaderBytes)
	lim.HeaderTimeout = cmp.Or(lim.HeaderTimeout, d.HeaderTimeout)
	lim.IdleTimeout = cmp.Or(lim.IdleTimeout, d.IdleTimeout)
	cfg.MaxUnbound = cmp.Or(cfg.MaxUnbound, DefaultMaxUnbound)
	cfg.Validity = cmp.Or(cfg.Validity, DefaultValidity)
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	caPEM, cert, err := hostsock.NewServerIdentity(cfg.Hosts, time.Now(), cfg.Validity)
	if err != nil {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen on %s: %w", addr, err)
	}
	g := &Gateway{
		log: log, caPEM: caPEM, done: make(chan struct{}), closing: make(chan struct{}),
		unbound: make(chan struct{}, cfg.MaxUnbound),
		logRate: rate.NewLimiter(1, 10),
		invs:    map[[sha256.Size]byte]*invocation{},
	}
	g.ln = tls.NewListener(&listener{Listener: tcp, g: g}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		MinVersion:   tls.VersionTLS13, // both ends are ours
		NextProtos:   []string{"http/1.1"},
	})
	g.srv = &http.Server{
		Handler: g,
		// Also the TLS handshake's limit (net/http takes the shortest of
		// its timeouts for it).
		ReadHeaderTimeout: lim.HeaderTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		IdleTimeout:       lim.IdleTimeout,
		// HTTP/1.1 only: an invocation's limits count connections, and its
		// egress proxy takes a connection over (hijacks it).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// Handshake failures of whoever connects: not worth a warning each.
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return context.Background() },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				if gc, ok := tc.NetConn().(*conn); ok {
					return context.WithValue(ctx, connKey{}, gc)
				}
			}
			return ctx
		},
	}
	go func() {
		defer close(g.done)
		if err := g.srv.Serve(g.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("gateway stopped", "err", err)
		}
	}()
	return g, nil
}

// Addr is the address the gateway listens on.
func (g *Gateway) Addr() net.Addr { return g.ln.Addr() }

// CACert is the PEM certificate sandboxes verify the gateway by.
func (g *Gateway) CACert() []byte { return g.caPEM }

// Register makes a credential for the invocation h serves and returns it,
// with the function that ends the invocation at the gateway: its
// credential is refused from then on and its open connections are cut.
// A request already accepted may still be running in h, as on a socket
// whose server closes (hostsock's Close waits for what it must). Call end
// before closing h; it may be called more than once.
func (g *Gateway) Register(h Handler) (credential string, end func(), err error) {
	var raw [credentialBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("gateway credential: %w", err)
	}
	credential = base64.RawURLEncoding.EncodeToString(raw[:])
	inv := &invocation{cred: []byte(credential), h: h, max: h.MaxConns(), conns: map[*conn]struct{}{}}
	key := sha256.Sum256(inv.cred)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return "", nil, errors.New("gateway is closed")
	}
	g.invs[key] = inv
	g.mu.Unlock()
	var once sync.Once
	return credential, func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.invs, key)
			g.mu.Unlock()
			inv.end()
		})
	}, nil
}

// Close stops the gateway and cuts every connection; registered
// invocations' credentials are refused from then on.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if !g.closed {
		close(g.closing)
	}
	g.closed = true
	invs := g.invs
	g.invs = map[[sha256.Size]byte]*invocation{}
	g.mu.Unlock()
	for _, inv := range invs {
		inv.end() // hijacked connections are not the server's to close
	}
	err := g.srv.Close()
	<-g.done
	return err
}

// lookup finds the invocation whose credential cred is, nil if none is. The
// map is keyed by the credential's hash, so its lookup tells a guesser
// nothing about the credential's bytes; the credential itself is then
// compared in constant time.
func (g *Gateway) lookup(cred string) *invocation {
	if len(cred) != credentialLen {
		return nil
	}
	key := sha256.Sum256([]byte(cred))
	g.mu.Lock()
	inv := g.invs[key]
	g.mu.Unlock()
	if inv == nil || subtle.ConstantTimeCompare(inv.cred, []byte(cred)) != 1 {
		return nil
	}
	return inv
}

// ServeHTTP authenticates a request and hands it to its invocation's server.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(*conn)
	if c == nil { // not one of the listener's connections: cannot be counted
		g.refuse(w, r, http.StatusInternalServerError, "connection not accounted")
		return
	}
	creds := r.Header.Values(CredentialHeader)
	if len(creds) == 0 {
		g.refuse(w, r, http.StatusUnauthorized, "no credential")
		return
	}
	var inv *invocation
	if len(creds) == 1 {
		inv = g.lookup(creds[0])
	}
	if inv == nil {
		g.refuse(w, r, http.StatusUnauthorized, "credential not valid (unknown, or its invocation ended)")
		return
	}
	switch err := c.bind(inv); {
	case errors.Is(err, errOther):
		g.refuse(w, r, http.StatusForbidden, "this connection belongs to another invocation")
		return
	case errors.Is(err, errFull):
		w.Header().Set("Retry-After", "1")
		g.refuse(w, r, http.StatusTooManyRequests, "more than "+strconv.Itoa(inv.max)+" connections of this invocation")
		return
	case err != nil: // ended meanwhile, or the connection closed
		g.refuse(w, r, http.StatusUnauthorized, "credential not valid (unknown, or its invocation ended)")
		return
	}
	r.Header.Del(CredentialHeader)
	inv.h.ServeHTTP(w, r)
}

// refuse answers like the host socket ({"error": "denied: reason"}) and
// closes the connection: one that has not shown a valid credential holds
// a slot no longer than its first request takes. The log names the
// reason and the peer, never a header or the URL, where a credential may
// be.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	w.Header().Set("Connection", "close")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="clawpen-gateway"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "denied: " + reason})

	g.mu.Lock()
	if !g.logRate.Allow() {
		g.suppressed++
		g.mu.Unlock()
		return
	}
	n := g.suppressed
	g.suppressed = 0
	g.mu.Unlock()
	g.log.Warn("gateway refused a request", "reason", reason, "status", status, "peer", r.RemoteAddr, "unlogged_before", n)
}

// invocation is one registered invocation.
type invocation struct {
	cred []byte
	h    Handler
	max  int // connections at once

	mu    sync.Mutex
	ended bool
	conns map[*conn]struct{}
}

var (
	errOther  = errors.New("connection bound to another invocation")
	errFull   = errors.New("invocation has all its connections")
	errEnded  = errors.New("invocation ended")
	errClosed = errors.New("connection closed")
)

func (inv *invocation) add(c *conn) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	switch {
	case inv.ended:
		return errEnded
	case len(inv.conns) >= inv.max:
		return errFull
	}
	inv.conns[c] = struct{}{}
	return nil
}

func (inv *invocation) drop(c *conn) {
	inv.mu.Lock()
	delete(inv.conns, c)
	inv.mu.Unlock()
}

func (inv *invocation) isEnded() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.ended
}

// end refuses the invocation's connections from now on and cuts those open.
func (inv *invocation) end() {
	inv.mu.Lock()
	inv.ended = true
	conns := inv.conns
	inv.conns = map[*conn]struct{}{}
	inv.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

type connKey struct{}

// listener counts the connections not yet bound to an invocation: Accept
// waits for a slot, which the connection gives back when it is bound or
// closed.
type listener struct {
	net.Listener
	g *Gateway
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case l.g.unbound <- struct{}{}:
	case <-l.g.closing:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.g.unbound
		return nil, err
	}
	return &conn{Conn: c, g: l.g}, nil
}

// conn is one TCP connection of the gateway, bound to the invocation whose
// credential its first request presented.
type conn struct {
	net.Conn
	g *Gateway

	mu     sync.Mutex
	inv    *invocation // nil until bound
	closed bool
}

// bind makes c a connection of inv, giving back its unbound slot; a
// connection already bound stays its invocation's.
func (c *conn) bind(inv *invocation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return errClosed
	case c.inv == inv:
		if inv.isEnded() {
			return errEnded
		}
		return nil
	case c.inv != nil:
		return errOther
	}
	if err := inv.add(c); err != nil {
		return err
	}
	c.inv = inv
	<-c.g.unbound
	return nil
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return err
	}
	c.closed = true
	inv := c.inv
	c.mu.Unlock()
	if inv == nil {
		<-c.g.unbound
	} else {
		inv.drop(c)
	}
	return err
}
