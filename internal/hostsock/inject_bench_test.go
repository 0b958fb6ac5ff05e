package hostsock

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkTLSRequestThroughEgress is the time of one HTTPS GET from the
// sandbox's side of the socket to a loopback upstream: through a plain
// tunnel (the upstream's own TLS end to end) and with the credential
// injected (TLS ended on the host, the request read and sent on over the
// host's own TLS), each on a new connection and kept alive. The injected
// request's added latency is the difference of the p50s (target 2 ms).
// Each sub-benchmark has a socket of its own: one socket is one run, whose
// egress connections are capped.
func BenchmarkTLSRequestThroughEgress(b *testing.B) {
	credAddr, credCert, _ := tlsUpstream(b)
	plainAddr, plainCert, _ := tlsUpstream(b)
	for _, injected := range []bool{false, true} {
		for _, keep := range []bool{false, true} {
			name := map[bool]string{false: "tunnel", true: "injected"}[injected] +
				map[bool]string{false: "/new-connection", true: "/kept-alive"}[keep]
			b.Run(name, func(b *testing.B) {
				s, _ := injectServer(b, credAddr, poolOf(credCert), plainAddr)
				url, c := "https://"+plainAddr+"/x", sandboxClient(s, poolOf(plainCert), false)
				if injected {
					url, c = "https://"+credAddr+"/x", sandboxClient(s, runCAPool(b, s), false)
				}
				tr := c.Transport.(*http.Transport)
				tr.DisableKeepAlives = !keep
				defer tr.CloseIdleConnections()
				var took []time.Duration
				for b.Loop() {
					start := time.Now()
					resp, err := c.Get(url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}
