package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// Row names of the egress section.
const (
	rowEgressDirectTTFB = "connect → first byte, direct"
	rowEgressProxyTTFB  = "connect → first byte, through the egress proxy"
	rowEgressAdded      = "added p50 per connection"
	rowEgressDirectMBs  = "download, direct"
	rowEgressProxyMBs   = "download, through the egress proxy"
)

// Targets of the egress section.
const (
	egressAddedTarget = 2 * time.Millisecond
	egressRateTarget  = 0.5 // of direct
)

// egressProxy measures what the egress proxy adds: the time from connecting
// to the first byte of the destination's data, and the rate of one large
// download, from a loopback server, through clawpen-agent's relay and the
// host socket's proxy against the same made directly, in one run.
func egressProxy(ctx context.Context, o Options) Section {
	s := Section{Name: "egress proxy"}
	size := int64(100 << 20)
	if o.Quick {
		size = 20 << 20
	}
	runs := o.runs()
	o.progress("bench: egress proxy, %d connections and a %d MB download each way", runs, size>>20)

	dir, err := os.MkdirTemp("", "clawpen-bench-egress-")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer os.RemoveAll(dir)
	dest, err := egressDest(size)
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer dest.Close()
	target := dest.Addr().String()

	// The host socket as a run with network has it, allowing exactly the
	// loopback server's address, and the agent's relay in front of it: the
	// path a sandbox's curl takes, without the sandbox's own loopback.
	srv, err := hostsock.Listen(filepath.Join(dir, "host.sock"), -1, -1, domain.Caller{Group: "bench", Run: "bench"}, hostsock.Config{
		Profile: domain.Profile{Name: "bench", Network: domain.NetworkAllowlist, Egress: []string{target}},
		Egress:  hostsock.EgressLimits{MaxTotal: runs + 16, MaxBytes: 4 * size},
	})
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer srv.Close()
	relay, err := agent.ListenEgress("127.0.0.1:0")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer relay.Close()
	go agent.ServeEgress(ctx, relay, srv.Path(), slog.New(slog.DiscardHandler))
	proxy := relay.Addr().String()

	direct := func(want int64) (time.Duration, time.Duration, error) { return fetch(ctx, target, "", want) }
	proxied := func(want int64) (time.Duration, time.Duration, error) { return fetch(ctx, proxy, target, want) }

	var dSamples, pSamples []time.Duration
	for i := -1; i < runs; i++ { // one warm-up each
		// Interleaved, so that both see the same machine.
		d, _, err := direct(1)
		if err != nil {
			s.Skipped = "direct: " + err.Error()
			return s
		}
		p, _, err := proxied(1)
		if err != nil {
			s.Skipped = "through the proxy: " + err.Error()
			return s
		}
		if i >= 0 {
			dSamples, pSamples = append(dSamples, d), append(pSamples, p)
		}
	}
	dRow, pRow := Latency(rowEgressDirectTTFB, dSamples), Latency(rowEgressProxyTTFB, pSamples)
	pRow.RatioTo = rowEgressDirectTTFB
	added := pRow.P50 - dRow.P50
	s.Rows = append(s.Rows, dRow, pRow,
		Value(rowEgressAdded, "ms", added).WithTarget(fmt.Sprintf("≤ %d ms", egressAddedTarget.Milliseconds()), added <= ms(egressAddedTarget)))

	_, dAll, err := direct(size)
	if err != nil {
		s.Skipped = "direct download: " + err.Error()
		return s
	}
	_, pAll, err := proxied(size)
	if err != nil {
		s.Skipped = "download through the proxy: " + err.Error()
		return s
	}
	rate := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	dRate, pRate := Value(rowEgressDirectMBs, "MB/s", rate(dAll)), Value(rowEgressProxyMBs, "MB/s", rate(pAll))
	pRate.RatioTo = rowEgressDirectMBs
	met := rate(pAll) >= egressRateTarget*rate(dAll)
	s.Rows = append(s.Rows, dRate, pRate.WithTarget(fmt.Sprintf("≥ %.0f%% of direct", egressRateTarget*100), met))
	s.fillRatios()
	s.Notes = []string{
		"direct: a TCP connection from this process to a loopback server (127.0.0.1), which writes as soon as it accepts; first byte: the first byte of its data.",
		"through the egress proxy: the same, through clawpen-agent's relay (as on 127.0.0.1:3128 in a sandbox), the host socket and its proxy (CONNECT, policy check, host-side dial of the listed IP literal, counted copy both ways); first byte: the destination's, after the 200.",
		fmt.Sprintf("download: %d MB read to the end, one connection each way, after the latency runs.", size>>20),
	}
	return s
}

// egressDest serves every connection by writing n bytes, the first at once.
// A one-byte read from it is a latency probe: its first byte is its answer.
func egressDest(n int64) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	chunk := make([]byte, 256<<10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// How much to send: one byte for a probe, all of it otherwise.
				var want [1]byte
				if _, err := io.ReadFull(c, want[:]); err != nil {
					return
				}
				left := int64(1)
				if want[0] == 'A' {
					left = n
				}
				for left > 0 {
					k := min(left, int64(len(chunk)))
					if _, err := c.Write(chunk[:k]); err != nil {
						return
					}
					left -= k
				}
			}()
		}
	}()
	return ln, nil
}

// fetch connects to addr (through CONNECT to via when via is set), asks for
// want bytes (1: a probe) and reads them. It answers the time to the first
// byte of the destination's data and to the last.
func fetch(ctx context.Context, addr, via string, want int64) (first, all time.Duration, err error) {
	var d net.Dialer
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	ask := "1"
	if want > 1 {
		ask = "A"
	}
	r := bufio.NewReaderSize(c, 256<<10)
	if via != "" {
		if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n%s", via, via, ask); err != nil {
			return 0, 0, err
		}
		status, err := r.ReadString('\n')
		if err != nil {
			return 0, 0, fmt.Errorf("CONNECT: %w", err)
		}
		if !strings.Contains(status, " 200 ") {
			return 0, 0, errors.New("CONNECT refused: " + strings.TrimSpace(status))
		}
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return 0, 0, err
			}
			if l == "\r\n" {
				break
			}
		}
	} else if _, err := io.WriteString(c, ask); err != nil {
		return 0, 0, err
	}
	if _, err := r.ReadByte(); err != nil {
		return 0, 0, fmt.Errorf("first byte: %w", err)
	}
	first = time.Since(start)
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return 0, 0, err
	}
	if got := n + 1; got != want && want > 1 {
		return 0, 0, fmt.Errorf("read %d of %d bytes", got, want)
	}
	return first, time.Since(start), nil
}
