package hostsock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

type proxies struct {
	anthropic http.HandlerFunc
	openai    http.HandlerFunc
}

// credentialHeaders are removed from every proxied request: the sandbox holds no
// credentials, and anything it sends in their place must not reach the provider.
var credentialHeaders = []string{
	"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key",
	"Cookie", "Cookie2", "Anthropic-Api-Key", "Openai-Api-Key",
	"Openai-Organization", "Openai-Project",
}

func (s *Server) newProxies() proxies {
	transport := http.DefaultTransport
	if s.cfg.Client != nil && s.cfg.Client.Transport != nil {
		transport = s.cfg.Client.Transport
	}
	anthropic := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			s.rewrite(pr, s.anthropic, pr.In.URL.Path)
			if s.cfg.Anthropic.APIKey != "" {
				pr.Out.Header.Set("X-Api-Key", s.cfg.Anthropic.APIKey)
			}
			if pr.Out.Header.Get("Anthropic-Version") == "" {
				pr.Out.Header.Set("Anthropic-Version", DefaultAnthropicVer)
			}
		},
		Transport:     transport,
		FlushInterval: -1, // server-sent events must pass through as they come
		ErrorHandler:  s.proxyError("anthropic"),
	}
	p := proxies{anthropic: s.limitBody(anthropic)}
	if s.openai != nil {
		openai := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				// OPENAI_BASE_URL conventionally ends in /v1 already.
				s.rewrite(pr, s.openai, strings.TrimPrefix(pr.In.URL.Path, "/v1"))
				if s.cfg.OpenAI.APIKey != "" {
					pr.Out.Header.Set("Authorization", "Bearer "+s.cfg.OpenAI.APIKey)
				}
			},
			Transport:     transport,
			FlushInterval: -1,
			ErrorHandler:  s.proxyError("openai"),
		}
		p.openai = s.limitBody(openai)
	}
	return p
}

// rewrite points the outgoing request at base + path and strips what the sandbox
// must not pass on. Rewrite has already removed hop-by-hop headers.
func (s *Server) rewrite(pr *httputil.ProxyRequest, base *url.URL, path string) {
	out := pr.Out
	out.URL.Scheme, out.URL.Host = base.Scheme, base.Host
	// path is one of the fixed routes, so plain concatenation is exact.
	out.URL.Path, out.URL.RawPath = strings.TrimSuffix(base.Path, "/")+path, ""
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = base.Host
	for _, h := range credentialHeaders {
		out.Header.Del(h)
	}
	out.Header.Del("Forwarded")
	out.Header.Del("X-Forwarded-For")
	out.Header.Del("X-Forwarded-Host")
	out.Header.Del("X-Forwarded-Proto")
	s.log.Debug("proxy", "method", pr.In.Method, "path", pr.In.URL.Path, "upstream_host", base.Host)
}

// limitBody reads the whole request body under the cap before proxying, so an
// oversize request is refused with a clear 400 instead of a broken upstream call.
func (s *Server) limitBody(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit := s.maxBody(DefaultProxyMaxBytes)
		body, err := readCapped(r.Body, limit)
		if err != nil {
			s.bodyError(w, err, limit)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	}
}

// proxyError answers a failed upstream call. The error text names the upstream
// URL at most; the credentials travel in headers and never appear in it.
func (s *Server) proxyError(name string) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			return // the sandbox went away
		}
		s.log.Warn("provider request failed", "provider", name, "err", err)
		writeError(w, http.StatusBadGateway, fmt.Sprintf("%s provider unreachable", name))
	}
}

var errTooLarge = errors.New("body too large")

// readCapped reads r up to limit bytes; more is errTooLarge.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

func (s *Server) bodyError(w http.ResponseWriter, err error, limit int64) {
	if errors.Is(err, errTooLarge) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("body larger than %d bytes", limit))
		return
	}
	writeError(w, http.StatusBadRequest, "cannot read request body")
}

// writeError answers {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
