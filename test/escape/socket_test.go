package escape

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(socketAttacks) }

// hostModel is the model the harness configures (CLAWPEN_MODEL).
const hostModel = "claude-test"

// memBound is how much the host's resident memory may grow while one
// sandbox attacks its socket: what the socket's limits let it hold (headers
// of every connection, about three times the bytes in flight while a body is
// rebuilt) and 32 MiB for the Go runtime's slack and the run itself.
var memBound = func() int64 {
	l := hostsock.DefaultLimits
	return int64(l.MaxConns)*int64(l.MaxHeaderBytes+4096) + 3*l.MaxInFlightBytes + 32<<20
}()

// peakWatch measures the host's peak resident memory over one attack: setup
// resets the kernel's high-water mark (VmHWM) to the current size, the check
// reads it back.
type peakWatch struct{ base int64 }

func (w *peakWatch) setup(t *testing.T, e *env) {
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", e.hostPID), []byte("5"), 0), "reset the host's VmHWM")
	w.base = procStatus(t, e.hostPID, "VmRSS")
}

func (w *peakWatch) check(t *testing.T, e *env) []string {
	peak := procStatus(t, e.hostPID, "VmHWM")
	t.Logf("host memory: %d MiB before, peak %d MiB (+%d MiB; bound +%d MiB)", w.base>>20, peak>>20, (peak-w.base)>>20, memBound>>20)
	if peak-w.base > memBound {
		return []string{fmt.Sprintf("the host's memory grew by %d MiB (from %d to %d MiB), past the bound of %d MiB",
			(peak-w.base)>>20, w.base>>20, peak>>20, memBound>>20)}
	}
	return nil
}

// procStatus reads a "kB" field of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err, sc.Text())
			return kb << 10
		}
	}
	require.NoError(t, sc.Err())
	require.Failf(t, "no field", "%s not in /proc/%d/status", field, pid)
	return 0
}

// marked are the requests the fake provider received from pwn that carry
// mark. The agent's own requests carry it too (the command, its output) but
// always offer the agent's tools; pwn's never do.
func marked(e *env, mark string) []fakellm.Request {
	var out []fakellm.Request
	for _, r := range e.h.LLM.Requests() {
		if strings.Contains(string(r.Body), mark) && !slices.Contains(r.ToolNames(), "bash") {
			out = append(out, r)
		}
	}
	return out
}

// body is a Messages API request whose text is mark; extra fields are
// spliced in after it.
func body(mark string, extra string) string {
	b := `{"model":"claude-opus-4-1-SANDBOX-CHOICE","max_tokens":64,"messages":[{"role":"user","content":"` + mark + `"}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// shq quotes s for the sandbox's shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// memAttack is a row whose evidence is the host's memory.
func memAttack(name string, msg func(e *env) string, want ...string) attack {
	w := &peakWatch{}
	return attack{name: name, setup: w.setup, msg: msg, want: want,
		check: func(t *testing.T, e *env, _ string) []string { return w.check(t, e) }}
}

// socketAttacks try to starve the host through the socket and to make the
// model proxy pass on what the sandbox chose.
func socketAttacks() []attack {
	lim := hostsock.DefaultLimits
	// The host may take at most its cap of a body it refuses; socket buffers
	// account for up to a MiB more on the sandbox's side.
	maxRead := lim.MaxModelBytes + 1<<20
	return []attack{
		memAttack("socket-slowloris-headers", func(e *env) string {
			return bash("./pwn sock-hold -name SLOWHDR -conns 200 -header-bytes 1000000 -open-headers -hold 7s", 30)
		}, "SLOWHDR-DONE"),

		memAttack("socket-slow-bodies", func(e *env) string {
			// Bodies under any sane cap, all but their last KiB sent, then a
			// byte a second.
			return bash("./pwn sock-hold -name SLOWBODY -conns 48 -body 7000000 -drip -hold 7s", 30)
		}, "SLOWBODY-DONE"),

		memAttack("socket-oversized-body", func(e *env) string {
			return bash(lines(
				fmt.Sprintf("./pwn sock-hold -name OVERSIZE-CL -conns 1 -body 1073741824 -max-read %d -hold 6s", maxRead),
				fmt.Sprintf("./pwn sock-hold -name OVERSIZE-CHUNKED -conns 1 -body 1073741824 -chunked -max-read %d -hold 6s", maxRead)), 30)
		}, "OVERSIZE-CL-DONE", "OVERSIZE-CHUNKED-DONE", "OVERSIZE-CL=HELD", "OVERSIZE-CHUNKED=HELD"),

		memAttack("socket-parallel-15MiB", func(e *env) string {
			return bash(lines(
				"{ ./pwn sock-hold -name PAR-CL -conns 24 -body 15728640 -lie -hold 6s & }",
				"./pwn sock-hold -name PAR-CHUNKED -conns 24 -body 15728640 -chunked -lie -hold 6s",
				"wait"), 30)
		}, "PAR-CL-DONE", "PAR-CHUNKED-DONE"),

		{name: "socket-model-override", msg: func(e *env) string {
			return bash("./pwn sock-req -name MODEL -body " + shq(body("SOCKATK-MODEL", "")))
		}, want: []string{"MODEL -> HTTP 200"}, check: func(t *testing.T, e *env, _ string) []string {
			return providerSaw(e, "SOCKATK-MODEL", func(r fakellm.Request) string {
				if r.Model != hostModel {
					return fmt.Sprintf("the provider was asked for model %q, not %q", r.Model, hostModel)
				}
				return ""
			})
		}},

		{name: "socket-max-tokens", msg: func(e *env) string {
			b := strings.Replace(body("SOCKATK-MAXTOK", `"stream":true`), `"max_tokens":64`, `"max_tokens":1000000000`, 1)
			return bash("./pwn sock-req -name MAXTOK -body " + shq(b))
		}, want: []string{"MAXTOK -> HTTP 200"}, check: func(t *testing.T, e *env, _ string) []string {
			return providerSaw(e, "SOCKATK-MAXTOK", func(r fakellm.Request) string {
				if r.MaxTokens > hostsock.DefaultMaxTokens {
					return fmt.Sprintf("the provider was asked for max_tokens %d", r.MaxTokens)
				}
				return ""
			})
		}},

		{name: "socket-beta-header", msg: func(e *env) string {
			return bash("./pwn sock-req -name BETA -H 'anthropic-beta: web-fetch-2025-09-10,mcp-client-2025-04-04,context-1m-2025-08-07'" +
				" -H 'anthropic-version: 2099-01-01' -H 'x-api-key: sk-ant-sandbox-own-key' -body " + shq(body("SOCKATK-BETA", "")))
		}, want: []string{"BETA -> HTTP"}, check: func(t *testing.T, e *env, _ string) []string {
			return providerSaw(e, "SOCKATK-BETA", func(r fakellm.Request) string {
				switch {
				case len(r.Header.Values("Anthropic-Beta")) > 0:
					return fmt.Sprintf("anthropic-beta reached the provider: %q", r.Header.Values("Anthropic-Beta"))
				case r.Header.Get("Anthropic-Version") != "2023-06-01":
					return fmt.Sprintf("anthropic-version %q reached the provider", r.Header.Get("Anthropic-Version"))
				case !slices.Equal(r.Header.Values("X-Api-Key"), []string{harness.APIKey}):
					return fmt.Sprintf("the provider got x-api-key %q, not only the host's", r.Header.Values("X-Api-Key"))
				}
				return ""
			})
		}},

		{name: "socket-server-tools", msg: func(e *env) string {
			tools := map[string]string{
				"FETCH":  `"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]`,
				"SEARCH": `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`,
				"CODE":   `"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`,
			}
			var cmds []string
			for _, k := range []string{"FETCH", "SEARCH", "CODE"} {
				cmds = append(cmds, "./pwn sock-req -name "+k+" -H 'anthropic-beta: web-fetch-2025-09-10' -body "+shq(body("SOCKATK-SRVTOOL-"+k, tools[k])))
			}
			img := `"messages":[{"role":"user","content":[{"type":"text","text":"SOCKATK-SRVTOOL-IMG"},` +
				`{"type":"image","source":{"type":"url","url":"https://evil.example/track.png"}}]}]`
			cmds = append(cmds, "./pwn sock-req -name IMG -body "+shq(`{"model":"x","max_tokens":64,`+img+`}`))
			return bash(lines(cmds...))
		}, want: []string{"FETCH -> HTTP", "SEARCH -> HTTP", "CODE -> HTTP", "IMG -> HTTP"},
			check: func(t *testing.T, e *env, _ string) []string {
				var ev []string
				for _, r := range marked(e, "SOCKATK-SRVTOOL-") {
					for _, bad := range []string{"web_fetch", "web_search", "code_execution", "evil.example"} {
						if strings.Contains(string(r.Body), bad) {
							ev = append(ev, fmt.Sprintf("%s reached the provider: %s", bad, clip(string(r.Body), 300)))
						}
					}
				}
				return ev
			}},

		{name: "socket-mcp-servers", msg: func(e *env) string {
			return bash("./pwn sock-req -name MCP -H 'anthropic-beta: mcp-client-2025-04-04' -body " + shq(body("SOCKATK-MCP",
				`"mcp_servers":[{"type":"url","url":"https://evil.example/sse","name":"evil"}],"container":"cntr_1","service_tier":"priority"`)))
		}, want: []string{"MCP -> HTTP"}, check: func(t *testing.T, e *env, _ string) []string {
			return providerSaw(e, "SOCKATK-MCP", func(r fakellm.Request) string {
				for _, bad := range []string{"mcp_servers", "evil.example", "container", "service_tier"} {
					if strings.Contains(string(r.Body), bad) {
						return fmt.Sprintf("%s reached the provider: %s", bad, clip(string(r.Body), 300))
					}
				}
				return ""
			}, true)
		}},

		{name: "socket-trailer-credentials", msg: func(e *env) string {
			trailers := " -T 'x-api-key: sk-ant-SMUGGLED-1' -T 'authorization: Bearer SMUGGLED-2' -T 'anthropic-beta: SMUGGLED-3'"
			return bash(lines(
				"./pwn sock-req -name TRAILER-DECLARED -declare"+trailers+" -body "+shq(body("SOCKATK-TRAILER-1", "")),
				"./pwn sock-req -name TRAILER-UNDECLARED"+trailers+" -body "+shq(body("SOCKATK-TRAILER-2", ""))))
		}, want: []string{"TRAILER-DECLARED -> HTTP", "TRAILER-UNDECLARED -> HTTP"},
			check: func(t *testing.T, e *env, _ string) []string {
				var ev []string
				for _, r := range marked(e, "SOCKATK-TRAILER-") {
					if len(r.Trailer) > 0 {
						ev = append(ev, fmt.Sprintf("trailers reached the provider: %v", r.Trailer))
					}
					for k, vs := range r.Header {
						if strings.Contains(strings.Join(vs, ","), "SMUGGLED") {
							ev = append(ev, fmt.Sprintf("header %s reached the provider: %q", k, vs))
						}
					}
				}
				return ev
			}},

		func() attack {
			var start time.Time
			return attack{name: "socket-request-flood", setup: func(t *testing.T, e *env) { start = time.Now() },
				msg: func(e *env) string {
					return bash("./pwn sock-flood -name FLOOD -n 400 -c 4 -body "+shq(body("SOCKATK-FLOOD", "")), 30)
				}, want: []string{"FLOOD=HELD"},
				check: func(t *testing.T, e *env, _ string) []string {
					n := len(marked(e, "SOCKATK-FLOOD"))
					most := lim.RequestBurst + int(time.Since(start).Seconds()*lim.RequestsPerSecond) + 1
					t.Logf("the provider received %d of 400 flooded requests (at most %d allowed)", n, most)
					if n > most {
						return []string{fmt.Sprintf("the provider received %d flooded requests, more than the %d the rate allows", n, most)}
					}
					return nil
				}}
		}(),
	}
}

// providerSaw applies bad to every request with mark the provider received;
// the first argument after bad, if true, allows none to have arrived (the
// proxy refused), otherwise none arriving leaves the attack unobserved.
func providerSaw(e *env, mark string, bad func(fakellm.Request) string, refusedOK ...bool) []string {
	rs := marked(e, mark)
	if len(rs) == 0 {
		if len(refusedOK) > 0 && refusedOK[0] {
			return nil
		}
		return []string{inconclusive + "no request with " + mark + " reached the provider"}
	}
	var ev []string
	for _, r := range rs {
		if s := bad(r); s != "" {
			ev = append(ev, s)
		}
	}
	return ev
}
