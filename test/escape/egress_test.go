package escape

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(egressAttacks) }

// egressMB is the escape host's CLAWPEN_EGRESS_MB: what one run may move
// through the egress proxy before its transfers are cut.
const egressMB = 16

// withEgress gives the attacked group a profile of its own whose egress
// list is entries, as the owner would: the profiles file, then `clawpen groups profile`.
func withEgress(t *testing.T, e *env, entries ...string) {
	t.Helper()
	var quoted []string
	for _, en := range entries {
		quoted = append(quoted, strconv.Quote(en))
	}
	e.h.WriteProfiles(t, fmt.Sprintf(`{"profiles":{"net-%s":{"network":"allowlist","egress":[%s]}}}`, e.folder, strings.Join(quoted, ",")))
	e.h.For(t).CLI("groups", "profile", e.folder, "net-"+e.folder)
}

// watched listens on addr and reports every connection it accepts on
// e.accepted: a destination the sandbox must never reach.
func watched(t *testing.T, e *env, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "listen on %s", addr)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted <- ln.Addr().String()
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// serveHTTP starts a loopback HTTP server on addr.
func serveHTTP(t *testing.T, addr string, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "listen on %s", addr)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// notReached is a check: no watched listener accepted a connection.
func notReached(t *testing.T, e *env, _ string) []string {
	select {
	case a := <-e.accepted:
		return []string{"the sandbox reached " + a + " through the egress proxy"}
	default:
		return nil
	}
}

// egressAudited is a check: the group's refusals are in the audit log.
func egressAudited(min int) func(t *testing.T, e *env, out string) []string {
	return func(t *testing.T, e *env, out string) []string {
		ev := notReached(t, e, out)
		if n := strings.Count(e.h.AuditLog(), e.folder+" egress deny"); n < min {
			ev = append(ev, fmt.Sprintf("%sonly %d egress refusals of %s audited, want %d", inconclusive, n, e.folder, min))
		}
		return ev
	}
}

func heldAll(name string, targets ...string) []string {
	var out []string
	for _, tg := range targets {
		out = append(out, name+"-"+tg+"=HELD")
	}
	return out
}

// egressAttacks go through the egress proxy: every way to name the host's
// loopback or another forbidden address, the host socket itself, bytes
// after a tunnel, and more connections and bytes than a run may have.
func egressAttacks() []attack {
	var (
		listedPort string // a listed server's port
		listedOwn  string // a listed server on the host's own address
		targets    []string
		raw        string // a listed server that reads a line and closes
		unlisted   string
		floodSrv   string
		maxOpen    atomic.Int64
		bigSrv     string
		sent       atomic.Int64
	)
	return []attack{
		{name: "egress-no-network", setup: func(t *testing.T, e *env) {
			targets = []string{watched(t, e, "127.0.0.2:0")}
		}, msg: func(e *env) string {
			return bash(lines("echo PROXYENV=[$HTTP_PROXY$HTTPS_PROXY$http_proxy$https_proxy]",
				"./pwn proxy NONET GET "+targets[0], "./pwn proxy NONET CONNECT "+targets[0]))
		}, want: []string{"PROXYENV=[]"}, check: func(t *testing.T, e *env, out string) []string {
			ev := notReached(t, e, out)
			if n := strings.Count(out, "NONET-"+targets[0]+"=HELD"); n != 2 {
				ev = append(ev, fmt.Sprintf("%s%d of 2 requests to the proxy port held", inconclusive, n))
			}
			return ev
		}},

		// "*" admits any public host on ports 80 and 443: the host's
		// loopback on port 80, in every notation, is not one.
		{name: "egress-loopback-notations", setup: func(t *testing.T, e *env) {
			watched(t, e, "127.0.0.1:80")
			if ln, err := net.Listen("tcp", "[::1]:80"); err == nil { // where the machine has IPv6
				ln.Close()
				watched(t, e, "[::1]:80")
			}
			withEgress(t, e, "*")
		}, msg: func(e *env) string {
			ts := "127.0.0.1:80 127.1:80 2130706433:80 0x7f000001:80 0177.0.0.1:80 127.0.0.1.:80 [::ffff:127.0.0.1]:80 [::1]:80 [::ffff:7f00:1]:80 [64:ff9b::7f00:1]:80 localhost:80 0.0.0.0:80 [::]:80 169.254.169.254:80 [::ffff:169.254.169.254]:80"
			return bash(lines("./pwn proxy STAR GET "+ts, "./pwn proxy STAR CONNECT "+strings.ReplaceAll(ts, ":80", ":443"), "echo NOTATIONS-DONE"), 60)
		}, want: append(heldAll("STAR", "127.0.0.1:80", "127.1:80", "2130706433:80", "0x7f000001:80", "0177.0.0.1:80", "[::ffff:127.0.0.1]:80",
			"[::1]:80", "localhost:80", "169.254.169.254:80", "127.0.0.1:443", "localhost:443"), "NOTATIONS-DONE"),
			check: egressAudited(20)},

		{name: "egress-host-services", setup: func(t *testing.T, e *env) {
			// The host's own loopback services: the fake provider and Telegram.
			targets = nil
			for _, u := range []string{e.h.LLM.URL(), e.h.TG.URL()} {
				pu, err := url.Parse(u)
				require.NoError(t, err)
				targets = append(targets, pu.Host)
			}
			withEgress(t, e, "*", "*.localhost")
		}, msg: func(e *env) string {
			return bash(lines("./pwn proxy SVC GET "+strings.Join(targets, " "), "./pwn proxy SVC CONNECT "+strings.Join(targets, " "), "echo SVC-DONE"))
		}, want: []string{"SVC-DONE"}, check: func(t *testing.T, e *env, out string) []string {
			var ev []string
			for _, tg := range targets {
				if strings.Count(out, "SVC-"+tg+"=HELD") != 2 {
					ev = append(ev, inconclusive+"no two HELD verdicts for "+tg)
				}
			}
			return append(ev, egressAudited(4)(t, e, out)...)
		}},

		{name: "egress-unlisted", setup: func(t *testing.T, e *env) {
			listed := serveHTTP(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "LISTED-OK") })
			listedPort = portOnly(listed)
			targets = []string{watched(t, e, "127.0.0.3:0"), watched(t, e, "127.0.0.2:0"), "[::ffff:127.0.0.2]:" + listedPort,
				"127.0.0.02:" + listedPort, "127.0.0.2:" + listedPort + "0"}
			withEgress(t, e, listed)
		}, msg: func(e *env) string {
			// The control first: the listed server answers.
			return bash(lines("curl -sS --max-time 10 http://127.0.0.2:"+listedPort+"/; echo",
				"./pwn proxy UNL GET "+strings.Join(targets, " "), "./pwn proxy UNL CONNECT "+strings.Join(targets, " ")))
		}, want: []string{"LISTED-OK"}, check: func(t *testing.T, e *env, out string) []string {
			var ev []string
			for _, tg := range targets {
				if strings.Count(out, "UNL-"+tg+"=HELD") != 2 {
					ev = append(ev, inconclusive+"no two HELD verdicts for "+tg)
				}
			}
			return append(ev, egressAudited(2*len(targets))(t, e, out)...)
		}},

		// "*" admits public addresses; the host's own are the host, as its
		// loopback is: services it binds on 0.0.0.0 are there. The host gets
		// such an address for the row (hostAddress), with a listener on the
		// ports "*" admits and, as the control, a server on another port
		// listed exactly, which shows that the address is reachable.
		{name: "egress-host-own-address", setup: func(t *testing.T, e *env) {
			own := "[" + hostAddress(t) + "]"
			targets = []string{watched(t, e, own+":80"), watched(t, e, own+":443")}
			listedOwn = serveHTTP(t, own+":0", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "OWN-LISTED-OK") })
			withEgress(t, e, "*", listedOwn)
		}, msg: func(e *env) string {
			return bash(lines("curl -g -sS --max-time 10 http://"+listedOwn+"/; echo",
				"./pwn proxy OWN GET "+strings.Join(targets, " "), "./pwn proxy OWN CONNECT "+strings.Join(targets, " ")))
		}, want: []string{"OWN-LISTED-OK"}, check: func(t *testing.T, e *env, out string) []string {
			ev := notReached(t, e, out)
			for _, tg := range targets {
				if strings.Count(out, "OWN-"+tg+"=HELD") != 2 {
					ev = append(ev, inconclusive+"no two HELD verdicts for "+tg)
				}
			}
			// Refused as the host's own, not for some other class the
			// address might be given one day.
			if n := strings.Count(e.h.AuditLog(), "is an address of this host"); n < 2*len(targets) {
				ev = append(ev, fmt.Sprintf("%sonly %d refusals as an address of this host audited, want %d", inconclusive, n, 2*len(targets)))
			}
			return ev
		}},

		{name: "egress-connect-host-socket", setup: func(t *testing.T, e *env) {
			withEgress(t, e, "*")
		}, msg: func(e *env) string {
			return bash(lines("./pwn proxy HOSTSOCK CONNECT /run/clawpen/host.sock unix:/run/clawpen/host.sock unix:///run/clawpen/host.sock "+
				filepath.Join(e.h.Dir, "data", "sockets")+" 127.0.0.1:3128 localhost:3128",
				"./pwn proxy HOSTSOCK GET 127.0.0.1:3128"))
		}, want: heldAll("HOSTSOCK", "/run/clawpen/host.sock", "unix:/run/clawpen/host.sock", "127.0.0.1:3128", "localhost:3128"),
			check: egressAudited(6)},

		{name: "egress-smuggle-after-tunnel", setup: func(t *testing.T, e *env) {
			ln, err := net.Listen("tcp", "127.0.0.2:0")
			require.NoError(t, err)
			t.Cleanup(func() { ln.Close() })
			raw = ln.Addr().String()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					b := make([]byte, 64)
					_, _ = c.Read(b) // one line, then the destination ends the tunnel
					c.Close()
				}
			}()
			unlisted = watched(t, e, "127.0.0.3:0")
			withEgress(t, e, raw)
		}, msg: func(e *env) string {
			return bash(fmt.Sprintf("./pwn proxy-smuggle %s %s %d", raw, unlisted, harness.OwnerID))
		}, want: []string{"SMUGGLE-TUNNEL: HTTP/1.1 200", "SMUGGLE=HELD"}, check: func(t *testing.T, e *env, out string) []string {
			ev := notReached(t, e, out)
			for _, s := range harness.Texts(e.h.TG.SentTo(harness.OwnerID)) {
				if strings.Contains(s, "SMUGGLED-VIA-TUNNEL") {
					ev = append(ev, "delivered to main: "+s)
				}
			}
			if !strings.Contains(e.h.AuditLog(), e.folder+" egress allow CONNECT "+raw) {
				ev = append(ev, inconclusive+"the tunnel was not audited")
			}
			return ev
		}},

		func() attack {
			w := &peakWatch{}
			return attack{name: "egress-connection-flood", setup: func(t *testing.T, e *env) {
				ln, err := net.Listen("tcp", "127.0.0.2:0")
				require.NoError(t, err)
				t.Cleanup(func() { ln.Close() })
				floodSrv = ln.Addr().String()
				var open atomic.Int64
				var mu sync.Mutex
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						n := open.Add(1)
						mu.Lock()
						if n > maxOpen.Load() {
							maxOpen.Store(n)
						}
						mu.Unlock()
						go func() {
							b := make([]byte, 1)
							_, _ = c.Read(b) // until the tunnel ends
							open.Add(-1)
							c.Close()
						}()
					}
				}()
				withEgress(t, e, floodSrv)
				w.setup(t, e)
			}, msg: func(e *env) string {
				return bash("./pwn proxy-flood FLOOD 300 "+floodSrv+" 4s", 60)
			}, want: []string{"FLOOD-OPENED="}, check: func(t *testing.T, e *env, out string) []string {
				ev := w.check(t, e)
				max := int64(hostsock.DefaultEgressLimits.MaxConns)
				if m := maxOpen.Load(); m > max {
					ev = append(ev, fmt.Sprintf("%d tunnels open at once, past the cap of %d", m, max))
				} else if m == 0 {
					ev = append(ev, inconclusive+"no tunnel opened")
				}
				if !strings.Contains(out, "FLOOD-REFUSED=") || strings.Contains(out, "FLOOD-REFUSED=0 ") {
					ev = append(ev, inconclusive+"the proxy refused none of 300 tunnels")
				}
				// Every connection is answered, opened or refused: one that got
				// nothing is a relay or socket that stopped serving the run.
				if i := strings.Index(out, "FLOOD-FAILED="); i >= 0 && !strings.HasPrefix(out[i:], "FLOOD-FAILED=0") {
					ev = append(ev, inconclusive+"some tunnels got no answer: "+clip(out[i:], 40))
				}
				return ev
			}}
		}(),

		{name: "egress-byte-cap", setup: func(t *testing.T, e *env) {
			bigSrv = serveHTTP(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
				const size = 256 << 20
				w.Header().Set("Content-Length", strconv.Itoa(size))
				chunk := make([]byte, 256<<10)
				for n := 0; n < size; n += len(chunk) {
					k, err := w.Write(chunk)
					sent.Add(int64(k))
					if err != nil {
						return
					}
				}
			})
			withEgress(t, e, bigSrv)
		}, msg: func(e *env) string {
			return bash(lines("curl -sS --max-time 60 -o /tmp/big http://"+bigSrv+"/ 2>&1 | head -c 200; echo",
				"curl -sS --max-time 60 -o /tmp/big2 http://"+bigSrv+"/ 2>&1 | head -c 200; echo",
				// wc, not stat: coreutils stat's statx flags are refused
				// by gVisor 2022-12-19 (EINVAL); wc takes a file's size
				// from fstat.
				"echo BIGSIZE=$(( $(wc -c < /tmp/big) + $(wc -c < /tmp/big2 2>/dev/null || echo 0) ))"), 90)
		}, want: []string{"BIGSIZE="}, check: func(t *testing.T, e *env, out string) []string {
			i := strings.Index(out, "BIGSIZE=")
			if i < 0 {
				return nil
			}
			var size int64
			_, _ = fmt.Sscanf(out[i+len("BIGSIZE="):], "%d", &size)
			t.Logf("received %d bytes in the sandbox; the server wrote %d", size, sent.Load())
			if size > egressMB<<20 {
				return []string{fmt.Sprintf("%d bytes reached the sandbox in one run, past the cap of %d MiB", size, egressMB)}
			}
			if size < 1<<20 {
				return []string{inconclusive + "the download did not start"}
			}
			return nil
		}},
	}
}

func portOnly(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// hostAddress gives the host, for the test, an address of its own that the
// egress policy counts as public, and answers it: an IPv6 address from
// 4000::/3, outside 2000::/3 (the only global unicast space), so reserved
// and routed nowhere, on one end of a veth pair made here and deleted when
// the test ends. A connection to it stays on this machine (the kernel
// delivers it locally, as it does a host's public address), and the
// listeners the row binds on it exist only once it is there. (A
// documentation address would do as well on the wire, but the policy
// already refuses those as a class: the row would prove nothing.)
func hostAddress(t *testing.T) string {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	link := fmt.Sprintf("cpesc%x", b)
	addr := fmt.Sprintf("4000::c1a3:%x:%x", b[0], uint16(b[1])<<8|uint16(b[2]))
	ip := func(args ...string) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	ip("link", "add", link, "type", "veth", "peer", "name", link+"p")
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", link).CombinedOutput(); err != nil {
			t.Errorf("remove the test's veth %s: %v: %s", link, err, out)
		}
	})
	ip("link", "set", link, "up")
	ip("-6", "addr", "add", addr+"/128", "dev", link, "nodad")
	return addr
}
