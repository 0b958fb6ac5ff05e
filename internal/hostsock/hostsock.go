// Package hostsock serves one agent invocation's unix socket: the only door out
// of a sandbox (DESIGN.md, "Host socket"). It proxies the model provider's API,
// rebuilding each request under the host's policy and adding the host's
// credentials, and hands /ipc/<operation> requests to the host with the
// identity of the socket they arrived on — never one taken from the request.
// Whatever the sandbox sends, what it can make the host hold is bounded
// (Limits).
package hostsock

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
)

// IPCFunc handles POST /ipc/<op> for the caller the socket was made for.
// body is the raw JSON request; response is encoded as JSON with the given
// HTTP status (0 means 200).
type IPCFunc func(ctx context.Context, c domain.Caller, op string, body []byte) (status int, response any)

// Upstream is a model provider the socket proxies to. APIKey never leaves the host
// except towards BaseURL.
type Upstream struct {
	BaseURL string
	APIKey  string
}

// configured reports whether the provider was set at all.
func (u Upstream) configured() bool { return u.BaseURL != "" || u.APIKey != "" }

// Defaults. The providers' URLs are config's (config.DefaultAnthropicURL …):
// the caller always names the base URL.
const (
	DefaultAnthropicVer = "2023-06-01"
	// DefaultMaxTokens caps max_tokens: twice what clawpen-agent asks for
	// (8192), so long answers pass, while one request's cost stays bounded.
	DefaultMaxTokens = 16384
)

// Config configures a socket's server.
type Config struct {
	// Anthropic: requests to /v1/messages go to BaseURL + "/v1/messages"
	// (BaseURL as in ANTHROPIC_BASE_URL). Unset: 404.
	Anthropic Upstream
	// OpenAI: /v1/chat/completions goes to BaseURL + "/chat/completions"
	// (BaseURL as in OPENAI_BASE_URL, including /v1). Unset: 404.
	OpenAI Upstream
	// Model is the model every proxied request names, whatever the sandbox
	// asked for: the configured one (a group's profile may later set its
	// own). Empty: the proxy refuses model requests.
	Model string
	// Profile is the sandbox profile of the run this socket serves: its
	// egress rules and daily token budget.
	Profile domain.Profile
	// Usage, when set, keeps the tokens of every answer, and is where the
	// profile's daily budget is checked (usage.go). A budget without it
	// refuses every model request.
	Usage UsageBook
	// Ledger holds the worst case of the model requests in flight against
	// their group's budget; a host gives all its sockets one (nil: the
	// socket keeps its own).
	Ledger *Ledger
	// Now and TZ place usage in days (default time.Now, time.Local).
	Now func() time.Time
	TZ  *time.Location
	// MaxTokens caps max_tokens; 0 means DefaultMaxTokens.
	MaxTokens int64
	IPC       IPCFunc
	// MCP, when set, serves the run's bridge tools over MCP (Streamable
	// HTTP) at /mcp, for the caller this socket is made for.
	MCP http.Handler
	// Audit, when set, records the proxy's refusals (the first few of a
	// socket, then how many more there were when it closes).
	Audit  func(ctx context.Context, e domain.AuditEntry) error
	Logger *slog.Logger
	Limits Limits
	// Egress bounds the egress proxy of a run whose Profile has network;
	// Resolver resolves its host names (default net.DefaultResolver);
	// HostAddrs lists the host's own addresses, asked at each decision that
	// would dial a public address (default: its interfaces' addresses now).
	Egress    EgressLimits
	Resolver  Resolver
	HostAddrs func() ([]netip.Addr, error)
	// AskEgress, when the Profile says egress_ask, is asked about a
	// destination its egress list does not hold (egress_ask.go): the owner,
	// or the owner's earlier "allow for the group". It answers who allowed
	// it, or an error whose text follows "denied: ".
	AskEgress func(ctx context.Context, host string, port int) (string, error)
	// Getenv reads the host's variables that the profile's credentials
	// name, at each request (nil: none is set, and a credential's request
	// is refused). UpstreamRoots are the roots an upstream the host injects
	// a credential for is verified against (nil: the system's). Guard finds
	// the host's secrets in egress requests the host reads (nil: none).
	Getenv        func(string) string
	UpstreamRoots *x509.CertPool
	Guard         *leakguard.Guard
	// Client supplies the Transport for upstream requests (default
	// http.DefaultTransport); its redirect and timeout settings are not used,
	// since a proxy must not follow redirects and streams can be long.
	Client *http.Client
}

// maxExchanges is more model requests than a socket ever has at once.
const maxExchanges = 1 << 40

// Server serves one socket.
type Server struct {
	path      string
	caller    domain.Caller // who is on the other end; fixed when the socket is made
	cfg       Config
	lim       Limits
	policy    Policy
	log       *slog.Logger
	ln        net.Listener
	srv       *http.Server
	anthropic *url.URL
	openai    *url.URL // nil when not configured
	proxies   proxies
	inFlight  *semaphore.Weighted // request body bytes held, over all connections
	rate      *rate.Limiter       // model requests
	ledger    *Ledger
	// exchanges counts the model requests whose usage is still to be
	// recorded; Close takes all of it, which waits for the last and, once
	// waiting, lets no more start (TryAcquire fails behind a waiter).
	exchanges     *semaphore.Weighted
	drains        *semaphore.Weighted // answers read after their client left
	refusals      refusals
	egress        *egress
	budgetMu      sync.Mutex
	budgetRefusal *BudgetRefusal // the first, if any
	closeOnce     sync.Once
	closeErr      error
	done          chan struct{}
}

// Listen creates the socket at path for caller c (an agent run), owned by
// uid/gid (-1 leaves it) with mode 0600, and serves it until Close. A stale socket at path is replaced; any other
// kind of file there is an error.
func Listen(path string, uid, gid int, c domain.Caller, cfg Config) (*Server, error) {
	s, err := New(c, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := listenPrivate(path, uid, gid)
	if err != nil {
		return nil, err
	}
	s.path = path
	// More connections than this wait in the kernel's backlog, costing the
	// host nothing, until one of these closes.
	s.ln = netutil.LimitListener(ln, s.MaxConns())
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.lim.HeaderTimeout,
		MaxHeaderBytes:    s.lim.MaxHeaderBytes,
		IdleTimeout:       s.lim.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.Background() },
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("host socket stopped", "err", err)
		}
	}()
	return s, nil
}

// New makes the server of caller c without a socket of its own: whoever
// accepts c's connections serves them with it (ServeHTTP), as the gateway
// does for connections that present c's credential. It must hold them to
// MaxConns and the Limits' header size and timeouts itself. Close as for a
// socket.
func New(c domain.Caller, cfg Config) (*Server, error) {
	lim := cfg.Limits.withDefaults()
	s := &Server{
		caller: c, cfg: cfg, lim: lim, log: cfg.Logger,
		policy:    Policy{Model: cfg.Model, MaxTokens: cfg.MaxTokens},
		inFlight:  semaphore.NewWeighted(lim.MaxInFlightBytes),
		rate:      rate.NewLimiter(rate.Limit(lim.RequestsPerSecond), lim.RequestBurst),
		ledger:    cfg.Ledger,
		exchanges: semaphore.NewWeighted(maxExchanges),
		drains:    semaphore.NewWeighted(int64(lim.MaxDrains)),
	}
	if s.ledger == nil {
		s.ledger = NewLedger()
	}
	if s.policy.MaxTokens <= 0 {
		s.policy.MaxTokens = DefaultMaxTokens
	}
	s.refusals.s = s
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("invocation", c.Run, "group", c.Group)

	var err error
	if cfg.Anthropic.configured() {
		if s.anthropic, err = parseBase(cfg.Anthropic.BaseURL); err != nil {
			return nil, fmt.Errorf("anthropic base URL: %w", err)
		}
	}
	if cfg.OpenAI.configured() {
		if s.openai, err = parseBase(cfg.OpenAI.BaseURL); err != nil {
			return nil, fmt.Errorf("openai base URL: %w", err)
		}
	}
	s.proxies = s.newProxies()
	s.egress = newEgress(s, cfg)
	if cfg.Profile.HasNetwork() && len(cfg.Profile.Credentials) > 0 {
		if s.egress.ca, err = newRunCA(cfg.Profile.Credentials, time.Now()); err != nil {
			return nil, err
		}
		s.egress.creds = cfg.Profile.Credentials
	}

	return s, nil
}

// MaxConns is how many connections of the caller are served at once.
func (s *Server) MaxConns() int {
	n := s.lim.MaxConns
	if s.cfg.Profile.HasNetwork() {
		// Tunnels last: they get room of their own, so that they cannot
		// keep the agent from its model.
		n += s.egress.lim.MaxConns
	}
	return n
}

// Limits are the server's limits, defaults filled in.
func (s *Server) Limits() Limits { return s.lim }

// Caller is who the server was made for.
func (s *Server) Caller() domain.Caller { return s.caller }

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return u, nil
}

// listenPrivate binds the socket under a random name, sets its owner and mode,
// and only then renames it into place, so nobody can connect to it while it
// still has the umask's permissions. The parent (0711) cannot be listed, which
// keeps the temporary name private.
//
// Everything goes through a descriptor of the parent: bind(2) takes at most
// 107 bytes of path, which a data dir of some 55 characters already exceeds,
// while /proc/self/fd/<fd>/<name> is short wherever the directory is.
func listenPrivate(path string, uid, gid int) (net.Listener, error) {
	dir, name := filepath.Split(path)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open socket directory %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, fmt.Errorf("%s exists and is not a socket; not replacing it", path)
		}
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("random name: %w", err)
	}
	tmp := ".tmp-" + hex.EncodeToString(rnd[:]) + ".sock"
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: short, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// We remove the socket ourselves; it will not be at tmp any more.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		_ = ln.Close()
		_ = unix.Unlinkat(dfd, tmp, 0)
		return nil, err
	}
	if err := unix.Fchmodat(dfd, tmp, 0o600, 0); err != nil {
		return fail(fmt.Errorf("chmod socket: %w", err))
	}
	if uid != -1 || gid != -1 {
		if err := unix.Fchownat(dfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(fmt.Errorf("chown socket to %d:%d: %w", uid, gid, err))
		}
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return fail(fmt.Errorf("move socket into place: %w", err))
	}
	return ln, nil
}

// RunCA is the PEM certificate of the run's CA, which signs the hosts the
// profile holds credentials for, for the sandbox to trust; nil without
// credentials.
func (s *Server) RunCA() []byte {
	if s.egress.ca == nil {
		return nil
	}
	return s.egress.ca.certPEM
}

// Path is the socket's host path ("" for a server made by New).
func (s *Server) Path() string { return s.path }

// Close stops serving, cuts open connections and removes the socket file
// (a server made by New has neither: its connections are its acceptor's).
// It returns once the usage of every model request is recorded: an answer
// its client left is read for up to Limits.DrainTimeout more.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var err error
		if s.srv != nil {
			err = s.srv.Close()
			<-s.done
		}
		s.egress.close() // hijacked tunnels are not the server's to close
		_ = s.exchanges.Acquire(context.Background(), maxExchanges)
		if s.path != "" {
			if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove socket: %w", rerr))
			}
		}
		s.closeErr = err
		s.refusals.flush()
	})
	return s.closeErr
}

// ServeHTTP routes a request. Every answer of the socket itself is JSON.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isEgress(r) {
		s.egress.serve(w, r)
		return
	}
	path := r.URL.Path
	var h http.HandlerFunc
	switch {
	case path == "/v1/messages" || path == "/v1/messages/count_tokens":
		if s.anthropic == nil {
			writeError(w, http.StatusNotFound, "no Anthropic provider is configured")
			return
		}
		h = s.proxies.anthropic
	case path == "/v1/chat/completions":
		if s.openai == nil {
			writeError(w, http.StatusNotFound, "no OpenAI-compatible provider is configured")
			return
		}
		h = s.proxies.openai
	case path == "/mcp":
		if s.cfg.MCP == nil {
			writeError(w, http.StatusNotFound, "no MCP server on this socket")
			return
		}
		// The SDK answers methods other than POST itself (405: stateless).
		s.cfg.MCP.ServeHTTP(w, r)
		return
	case len(path) > len("/ipc/") && path[:len("/ipc/")] == "/ipc/":
		h = s.serveIPC
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s", path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use POST", r.Method))
		return
	}
	h(w, r)
}
