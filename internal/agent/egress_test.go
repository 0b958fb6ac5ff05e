package agent

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoHost stands in for the host socket: it echoes every connection.
func echoHost(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return path
}

// relayListener is the relay's port, counting what the relay holds: the
// connections it accepted and has not closed, and whether it ever asked for
// another while holding limit of them. The first failures calls to Accept
// fail as a process out of descriptors does.
type relayListener struct {
	net.Listener
	limit     int
	failures  atomic.Int32
	open      atomic.Int32
	overLimit atomic.Bool
}

func (l *relayListener) Accept() (net.Conn, error) {
	if int(l.open.Load()) >= l.limit {
		l.overLimit.Store(true)
	}
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *relayListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// startRelay serves the relay on a loopback port with limit relays at
// once, the first failures accepts failing; it stops with the test.
func startRelay(t *testing.T, limit int, failures int32) (*relayListener, string) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := &relayListener{Listener: tcp, limit: limit}
	ln.failures.Store(failures)
	host := echoHost(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveEgress(t.Context(), ln, socketOpener(host), slog.New(slog.DiscardHandler), limit)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln, tcp.Addr().String()
}

// roundTrip writes msg on c and reads it back through the relay. The
// deadline only guards against hanging: the echo takes milliseconds.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	_, err := io.WriteString(c, msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err, "no echo through the relay")
	assert.Equal(t, msg, string(got))
}

func dialRelay(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEgressRelayOutlivesAcceptErrors: a process out of descriptors for a
// moment fails accept(2); the relay goes on accepting afterwards, rather
// than leaving every later connection waiting unanswered.
func TestEgressRelayOutlivesAcceptErrors(t *testing.T) {
	_, addr := startRelay(t, 4, 3)
	roundTrip(t, dialRelay(t, addr), "after the accept errors")
}

// TestEgressRelayBounded: the relay carries at most its limit of
// connections at once (each costs descriptors); the next waits to be
// accepted until one ends, and is then carried.
func TestEgressRelayBounded(t *testing.T) {
	const limit = 2
	ln, addr := startRelay(t, limit, 0)
	var held []net.Conn
	for range limit {
		c := dialRelay(t, addr)
		roundTrip(t, c, "held")
		held = append(held, c)
	}
	next := dialRelay(t, addr)
	held[0].Close()
	roundTrip(t, next, "carried once one ended")
	assert.False(t, ln.overLimit.Load(), "the relay accepted another connection while carrying %d", limit)
}
