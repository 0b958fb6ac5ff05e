package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDebugEndpointRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		wait, err := startDebug(t.Context(), addr, slog.New(slog.DiscardHandler))
		assert.Error(t, err, addr)
		assert.Nil(t, wait, addr)
	}
}

func TestDebugEndpointServesPprofUntilCancelled(t *testing.T) {
	// Find a free loopback port; the tiny race with another listener is harmless here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(t.Context())
	wait, err := startDebug(ctx, addr, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, strings.HasPrefix(string(body), "goroutine profile: total "), "%.80s", body)

	// Not the default mux: nothing else is served there.
	resp, err = http.Get("http://" + addr + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	cancel()
	wait()
	_, err = http.Get("http://" + addr + "/debug/pprof/")
	assert.Error(t, err, "stopped with its context")
}
