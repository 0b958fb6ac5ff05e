package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
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
	serveEgress(ctx, ln, socketOpener(socketPath), log, maxRelays())
}

// StartEgressGateway starts ServeEgress through the host's TLS gateway in
// its own goroutine, once gw is found usable: each connection's proxy
// request gets the invocation's credential added, since the gateway,
// unlike the socket, knows the invocation by nothing else.
func StartEgressGateway(ctx context.Context, ln net.Listener, gw Gateway, log *slog.Logger) error {
	dial, err := gatewayDialer(gw)
	if err != nil {
		return err
	}
	go serveEgress(ctx, ln, gatewayOpener(dial, gw.Credential), log, maxRelays())
	return nil
}

// opener connects a client's connection to the host: it returns the
// host's connection and what to copy to it from then on.
type opener func(ctx context.Context, client net.Conn) (host net.Conn, from io.Reader, err error)

func socketOpener(path string) opener {
	var d net.Dialer
	return func(ctx context.Context, client net.Conn) (net.Conn, io.Reader, error) {
		host, err := d.DialContext(ctx, "unix", path)
		return host, client, err
	}
}

// maxRequestLine bounds the proxy request line the gateway relay reads
// before it adds the credential (the host allows 64 KiB of headers; a
// request line of a CONNECT or a URL is far shorter).
const maxRequestLine = 8 << 10

// gatewayOpener reads the client's request line, sends it to the gateway
// followed by the credential header, and leaves the rest to be copied as
// it comes. A client that sends a credential header of its own sends a
// second one, which the gateway refuses.
func gatewayOpener(dial func(context.Context) (net.Conn, error), cred string) opener {
	header := []byte(domain.GatewayCredentialHeader + ": " + cred + "\r\n")
	return func(ctx context.Context, client net.Conn) (net.Conn, io.Reader, error) {
		br := bufio.NewReaderSize(client, maxRequestLine)
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, nil, fmt.Errorf("read proxy request line: %w", err)
		}
		host, err := dial(ctx)
		if err != nil {
			return nil, nil, err
		}
		if _, err := host.Write(append(append([]byte(nil), line...), header...)); err != nil {
			_ = host.Close()
			return nil, nil, fmt.Errorf("write to gateway: %w", err)
		}
		return host, br, nil
	}
}

func serveEgress(ctx context.Context, ln net.Listener, open opener, log *slog.Logger, limit int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, limit)
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
			host, from, err := open(ctx, c)
			if err != nil {
				log.Warn("egress relay: host", "err", err)
				return
			}
			defer host.Close()
			relay(c, from, host)
		}()
	}
}

// relay copies from (the client's bytes) to b and b to a until either side
// ends, then ends both: the host closes a tunnel to end it, and that must
// reach the client.
func relay(a net.Conn, from io.Reader, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, from); done <- struct{}{} }()
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}
