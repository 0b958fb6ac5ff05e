package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyCheck is one readiness condition: err says why the host is not ready.
type readyCheck struct {
	Name string
	Run  func(ctx context.Context) error
}

// checkTimeout bounds one readiness check, so a stuck store cannot hang
// the orchestrator's probe.
const checkTimeout = 5 * time.Second

// health is what /healthz and /readyz answer from: the host's state until
// it serves (starting, or standing by while another host serves its
// database), then the checks of the serving host.
type health struct {
	mu     sync.Mutex
	state  string       // "" once the host serves; guarded by mu
	checks []readyCheck // set when it serves; guarded by mu
}

// newHealth is the health of a host that is starting.
func newHealth(checks ...readyCheck) *health {
	if len(checks) > 0 {
		return &health{checks: checks}
	}
	return &health{state: "starting"}
}

// set records the host's state: "starting", "standby: <why>".
func (h *health) set(state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state = state
}

// serving: from now on /readyz runs checks.
func (h *health) serving(checks []readyCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state, h.checks = "", checks
}

func (h *health) now() (string, []readyCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, h.checks
}

// metricsHandler serves /metrics (m's registry; nil m: none), /healthz (the
// process answers: "ok", or "standby: …" while another host serves the
// database) and /readyz (the host serves and every check passes: 200, else
// 503 naming the failed ones, or what the host is doing instead).
func metricsHandler(m *hostMetrics, hs *health) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if state, _ := hs.now(); strings.HasPrefix(state, "standby") {
			fmt.Fprintln(w, state)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		state, checks := hs.now()
		if state != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready\n"+state)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
		defer cancel()
		var failed []string
		for _, c := range checks {
			if err := c.Run(ctx); err != nil {
				failed = append(failed, c.Name+": "+err.Error())
			}
		}
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready\n"+strings.Join(failed, "\n"))
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// serveMetrics listens on addr and serves h until ctx is done; the returned wait
// blocks until the server has stopped. A listen error is returned at once,
// so a wrong address stops the host at start rather than silently.
func serveMetrics(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (wait func(), err error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: listen on %s: %w", addr, err)
	}
	log.Info("metrics and health endpoints listening", "addr", "http://"+ln.Addr().String()+"/metrics")
	return serveUntilDone(ctx, ln, h, "metrics endpoint", log), nil
}

// serveUntilDone serves h on ln until ctx is done, then shuts the server
// down (requests see their context end: BaseContext is ctx, so a pprof
// profile in progress ends too); wait blocks until it has stopped.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler, name string, log *slog.Logger) (wait func()) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name+" stopped", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return wg.Wait
}
