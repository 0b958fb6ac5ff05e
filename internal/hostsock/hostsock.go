// Package hostsock serves one agent invocation's unix socket: the only door out
// of a sandbox (DESIGN.md, "Host socket"). It proxies the model provider's API,
// adding the host's credentials, and hands /ipc/<operation> requests to the host
// with the identity of the socket they arrived on — never one taken from the
// request.
package hostsock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Identity is who is on the other end of a socket; fixed when the socket is made.
type Identity struct {
	Group        string // folder
	ChatID       int64
	IsMain       bool
	InvocationID string
}

// IPCFunc handles POST /ipc/<op>. body is the raw JSON request; response is
// encoded as JSON with the given HTTP status (0 means 200).
type IPCFunc func(ctx context.Context, id Identity, op string, body []byte) (status int, response any)

// Upstream is a model provider the socket proxies to. APIKey never leaves the host
// except towards BaseURL.
type Upstream struct {
	BaseURL string
	APIKey  string
}

// configured reports whether the provider was set at all.
func (u Upstream) configured() bool { return u.BaseURL != "" || u.APIKey != "" }

// Defaults.
const (
	DefaultAnthropicURL  = "https://api.anthropic.com"
	DefaultOpenAIURL     = "https://api.openai.com/v1"
	DefaultAnthropicVer  = "2023-06-01"
	DefaultProxyMaxBytes = 16 << 20
	DefaultIPCMaxBytes   = 64 << 10
)

// Config configures a socket's server.
type Config struct {
	// Anthropic: requests to /v1/messages go to BaseURL + "/v1/messages"
	// (BaseURL as in ANTHROPIC_BASE_URL, default https://api.anthropic.com).
	Anthropic Upstream
	// OpenAI: /v1/chat/completions goes to BaseURL + "/chat/completions"
	// (BaseURL as in OPENAI_BASE_URL, including /v1). Unset: 404.
	OpenAI Upstream
	IPC    IPCFunc
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; 0 means 16 MiB for the provider proxy
	// and 64 KiB for IPC, a positive value applies to both.
	MaxBodyBytes int64
	// Client supplies the Transport for upstream requests (default
	// http.DefaultTransport); its redirect and timeout settings are not used,
	// since a proxy must not follow redirects and streams can be long.
	Client *http.Client
}

// Server serves one socket.
type Server struct {
	path      string
	id        Identity
	cfg       Config
	log       *slog.Logger
	ln        net.Listener
	srv       *http.Server
	anthropic *url.URL
	openai    *url.URL // nil when not configured
	proxies   proxies
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Listen creates the socket at path, owned by uid/gid (-1 leaves it) with mode
// 0600, and serves it until Close. A stale socket at path is replaced; any other
// kind of file there is an error.
func Listen(path string, uid, gid int, id Identity, cfg Config) (*Server, error) {
	s := &Server{path: path, id: id, cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("invocation", id.InvocationID, "group", id.Group)

	var err error
	if s.anthropic, err = parseBase(cfg.Anthropic.BaseURL, DefaultAnthropicURL); err != nil {
		return nil, fmt.Errorf("anthropic base URL: %w", err)
	}
	if cfg.OpenAI.configured() {
		if s.openai, err = parseBase(cfg.OpenAI.BaseURL, DefaultOpenAIURL); err != nil {
			return nil, fmt.Errorf("openai base URL: %w", err)
		}
	}
	s.proxies = s.newProxies()

	ln, err := listenPrivate(path, uid, gid)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.Background() },
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("host socket stopped", "err", err)
		}
	}()
	return s, nil
}

func parseBase(raw, def string) (*url.URL, error) {
	if raw == "" {
		raw = def
	}
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
func listenPrivate(path string, uid, gid int) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; not replacing it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("random name: %w", err)
	}
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(rnd[:])+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// We remove the socket ourselves; it will not be at tmp any more.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(fmt.Errorf("chmod socket: %w", err))
	}
	if uid != -1 || gid != -1 {
		if err := os.Lchown(tmp, uid, gid); err != nil {
			return fail(fmt.Errorf("chown socket to %d:%d: %w", uid, gid, err))
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("move socket into place: %w", err))
	}
	return ln, nil
}

// Path is the socket's host path.
func (s *Server) Path() string { return s.path }

// Close stops serving, cuts open connections and removes the socket file.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.srv.Close()
		<-s.done
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove socket: %w", rerr))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// ServeHTTP routes a request. Every answer of the socket itself is JSON.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	var h http.HandlerFunc
	switch {
	case path == "/v1/messages" || path == "/v1/messages/count_tokens":
		h = s.proxies.anthropic
	case path == "/v1/chat/completions":
		if s.openai == nil {
			writeError(w, http.StatusNotFound, "no OpenAI-compatible provider is configured")
			return
		}
		h = s.proxies.openai
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

func (s *Server) maxBody(def int64) int64 {
	if s.cfg.MaxBodyBytes > 0 {
		return s.cfg.MaxBodyBytes
	}
	return def
}
