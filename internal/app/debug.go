package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/clawpen/clawpen/internal/config"
)

// debugMux serves net/http/pprof on a mux of its own: the package also
// registers itself on http.DefaultServeMux, which nothing here serves.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also the named profiles: goroutine, heap …
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startDebug serves pprof on addr (CLAWPEN_DEBUG_ADDR) until ctx is done;
// the returned wait blocks until the server has stopped. A non-loopback
// address is refused, also after resolving it, so the endpoint never
// listens where the network could reach it.
func startDebug(ctx context.Context, addr string, log *slog.Logger) (wait func(), err error) {
	if err := config.CheckDebugAddr(addr); err != nil {
		return nil, fmt.Errorf("CLAWPEN_DEBUG_ADDR=%q: %w", addr, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug endpoint: listen on %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		_ = ln.Close()
		return nil, fmt.Errorf("debug endpoint: %s resolved to %s, which is not loopback", addr, ln.Addr())
	}
	log.Info("debug endpoint (pprof) listening", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return serveUntilDone(ctx, ln, debugMux(), "debug endpoint", log), nil
}
