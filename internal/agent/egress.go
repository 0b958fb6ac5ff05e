package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// ListenEgress opens the sandbox's proxy port (domain.EgressProxyAddr) in
// the sandbox's own network namespace, where only a loopback exists: the
// only way out from it is the host socket.
func ListenEgress(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

// What one relayed connection costs in descriptors: the client's connection
// and the host's, and while Go splices between them (TCP to unix socket and
// back), a pipe of two descriptors for each direction, kept in a pool.
const fdsPerRelay = 6

// fdReserve is left to the rest of the agent (its model connections, the
// files its tools open, stdio) when the relay sizes itself.
const fdReserve = 128

// maxRelaysCap bounds the relays at once whatever the descriptor limit:
// twice the host's default of open egress connections a run (hostsock's
// DefaultEgressLimits.MaxConns), since the host refuses the rest at once.
const maxRelaysCap = 128

// maxRelays is how many connections the relay carries at once in this
// process: as many as its open-file limit leaves room for (a sandbox has
// 1024), at most maxRelaysCap.
func maxRelays() int {
	n := maxRelaysCap
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(fdReserve+fdsPerRelay*maxRelaysCap) {
		n = (int(rl.Cur) - fdReserve) / fdsPerRelay
	}
	return max(n, 1)
}

// ServeEgress relays every connection accepted on ln, as bytes, to a new
// connection on the host socket at socketPath, until ln is closed or ctx
// ends. The host's egress proxy reads the proxy request (CONNECT or
// absolute-form HTTP) and checks it; the agent decides nothing, so nothing
// here can grant what the host would refuse.
//
// At most maxRelays connections are relayed at once; more wait in the
// kernel's backlog until one ends. Unbounded, a flood of connections ran
// the agent out of descriptors, and the relay, which then stopped
// accepting, left every later one (and the command waiting on them)
// hanging until the run's time limit.
func ServeEgress(ctx context.Context, ln net.Listener, socketPath string, log *slog.Logger) {
	serveEgress(ctx, ln, socketPath, log, maxRelays())
}

func serveEgress(ctx context.Context, ln net.Listener, socketPath string, log *slog.Logger, limit int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, limit)
	var d net.Dialer
	var backoff time.Duration
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Out of descriptors or memory for a moment: that passes, and
			// the relay must outlive it, as net/http's server does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			log.Warn("egress relay: accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer c.Close()
			host, err := d.DialContext(ctx, "unix", socketPath)
			if err != nil {
				log.Warn("egress relay: host socket", "err", err)
				return
			}
			defer host.Close()
			relay(c, host)
		}()
	}
}

// relay copies both ways until either side ends, then ends both: the host
// closes a tunnel to end it, and that must reach the client.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}
