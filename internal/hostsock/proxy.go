package hostsock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

func (s *Server) newProxies() proxies {
	transport := http.DefaultTransport
	if s.cfg.Client != nil && s.cfg.Client.Transport != nil {
		transport = s.cfg.Client.Transport
	}
	proxy := func(name string, api apiShape, rewrite func(*httputil.ProxyRequest)) *httputil.ReverseProxy {
		return &httputil.ReverseProxy{
			Rewrite:       rewrite,
			Transport:     meteredTransport{next: transport, api: api},
			FlushInterval: -1, // server-sent events must pass through as they come
			ErrorHandler:  s.proxyError(name),
		}
	}
	anthropic := proxy("anthropic", anthropicShape, func(pr *httputil.ProxyRequest) {
		h := s.rewrite(pr, s.anthropic, pr.In.URL.Path)
		// The host's version, not the sandbox's: a version is a contract
		// about what the request may contain.
		h.Set("Anthropic-Version", DefaultAnthropicVer)
		if s.cfg.Anthropic.APIKey != "" {
			h.Set("X-Api-Key", s.cfg.Anthropic.APIKey)
		}
	})
	p := proxies{anthropic: s.rebuilding(anthropic, func(body []byte, r *http.Request) ([]byte, int64, error) {
		return rebuildAnthropic(body, r.URL.Path == "/v1/messages/count_tokens", s.policy)
	})}
	if s.openai != nil {
		openai := proxy("openai", openaiShape, func(pr *httputil.ProxyRequest) {
			// OPENAI_BASE_URL conventionally ends in /v1 already.
			h := s.rewrite(pr, s.openai, strings.TrimPrefix(pr.In.URL.Path, "/v1"))
			if s.cfg.OpenAI.APIKey != "" {
				h.Set("Authorization", "Bearer "+s.cfg.OpenAI.APIKey)
			}
		})
		p.openai = s.rebuilding(openai, func(body []byte, _ *http.Request) ([]byte, int64, error) {
			return rebuildOpenAI(body, s.policy)
		})
	}
	return p
}

// rewrite points the outgoing request at base + path, with none of the
// sandbox's headers but the media types: not its credentials, beta flags,
// version, idempotency keys or anything else. It returns the headers for the
// caller to add the provider's.
func (s *Server) rewrite(pr *httputil.ProxyRequest, base *url.URL, path string) http.Header {
	out := pr.Out
	out.URL.Scheme, out.URL.Host = base.Scheme, base.Host
	// path is one of the fixed routes, so plain concatenation is exact.
	out.URL.Path, out.URL.RawPath = strings.TrimSuffix(base.Path, "/")+path, ""
	out.URL.RawQuery = ""
	out.Host = base.Host
	h := http.Header{"Content-Type": {"application/json"}}
	switch a := pr.In.Header.Get("Accept"); a {
	case "application/json", "text/event-stream":
		h.Set("Accept", a)
	}
	out.Header = h
	out.Trailer = nil
	s.log.Debug("proxy", "path", pr.In.URL.Path, "upstream_host", base.Host, "bytes", out.ContentLength)
	return h
}

// rebuilding reads a model request under the socket's limits, rebuilds its
// body with rebuild (which also returns the request's max_tokens, 0 for a
// free one), and hands the result to next, counting its usage.
func (s *Server) rebuilding(next http.Handler, rebuild func([]byte, *http.Request) ([]byte, int64, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.policy.Model == "" {
			s.refuse(w, r, http.StatusForbidden, "no model is configured for this group")
			return
		}
		if !s.withinBudget(w, r) {
			return
		}
		if !s.rate.Allow() {
			s.refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("more than %d model requests at once or %g a second in this run",
				s.lim.RequestBurst, s.lim.RequestsPerSecond))
			return
		}
		body, res, ok := s.readBody(w, r, s.lim.MaxModelBytes)
		if !ok {
			return
		}
		var x *exchange
		defer func() {
			if x != nil {
				x.handled() // the bytes are the transport's to give back once it has them
				return
			}
			res.release()
		}()
		out, maxTokens, err := rebuild(body, r)
		if err != nil {
			var re *requestError
			switch {
			case !errors.As(err, &re):
				s.log.Error("rebuild model request", "err", err)
				writeError(w, http.StatusInternalServerError, "cannot rebuild the request")
			case re.status == http.StatusForbidden:
				s.refuse(w, r, re.status, strings.TrimPrefix(re.msg, "denied: "))
			default:
				writeError(w, re.status, re.msg)
			}
			return
		}
		if int64(len(out)) > s.lim.MaxModelBytes {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("rebuilt body larger than %d bytes", s.lim.MaxModelBytes))
			return
		}
		if !res.resize(int64(len(out))) {
			s.refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("more than %d bytes of requests in flight on this socket", s.lim.MaxInFlightBytes))
			return
		}
		// The bytes count until the transport has sent them and closed the body.
		r.Body = &releasingBody{r: bytes.NewReader(out), release: res.release}
		if maxTokens > 0 && s.cfg.Usage != nil {
			if x, ok = s.open(w, r, tokens{in: int64(len(out)) + promptOverhead, out: maxTokens}); !ok {
				return
			}
			x.body = r.Body
			r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x))
		}
		r.ContentLength = int64(len(out))
		r.TransferEncoding = nil
		r.Trailer = nil
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
