package escape

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func init() { register(bridgeAttacks) }

// toolsRel is the host's tools dir (CLAWPEN_TOOLS_DIR's default) below its $HOME.
const toolsRel = ".config/clawpen/tools"

// writeTool puts a bridge tool definition in the host's tools dir, as the
// owner would, and takes it away when the attack ends. The host reads it at
// the next call.
func writeTool(t *testing.T, e *env, file, frontMatter string) {
	t.Helper()
	dir := filepath.Join(e.h.Home, toolsRel)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	p := filepath.Join(dir, file)
	require.NoError(t, os.WriteFile(p, []byte("---\n"+frontMatter+"\n---\nGuidance.\n"), 0o600))
	t.Cleanup(func() { os.Remove(p) })
}

// withTools gives the attacked group a profile whose tools list is names.
func withTools(t *testing.T, e *env, names ...string) {
	t.Helper()
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	e.h.WriteProfiles(t, fmt.Sprintf(`{"profiles":{"tools-%s":{"tools":[%s]}}}`, e.folder, strings.Join(quoted, ",")))
	e.h.For(t).CLI("groups", "profile", e.folder, "tools-"+e.folder)
}

// evidence is a host path a tool would create if it ran when it must not.
func evidence(e *env, name string) string {
	return filepath.Join(e.h.Dir, "bridge-evidence-"+e.folder+"-"+name)
}

// hostToolReq is a pwn request straight to POST /ipc/host_tool, past the
// agent's own list of tools.
func hostToolReq(marker, name string) string {
	return fmt.Sprintf("./pwn sock-req -name %s -path /ipc/host_tool -body %s", marker, shq(fmt.Sprintf(`{"name":%q,"args":{}}`, name)))
}

// mcpReq is a pwn request of one JSON-RPC message to the socket's MCP server.
func mcpReq(marker, body string) string {
	return fmt.Sprintf("./pwn sock-req -name %s -path /mcp -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' -body %s", marker, shq(body))
}

// bridgeAudited is a check: none of the evidence files exists, and at
// least min refused bridge calls of the group are in the audit log.
func bridgeAudited(min int, files ...string) func(t *testing.T, e *env, out string) []string {
	return func(t *testing.T, e *env, out string) []string {
		ev := existing(files...)
		if n := strings.Count(e.h.AuditLog(), e.folder+" ipc.host_tool deny"); n < min {
			ev = append(ev, fmt.Sprintf("%sonly %d bridge refusals of %s audited, want %d", inconclusive, n, e.folder, min))
		}
		return ev
	}
}

// bridgeAttacks go through the host bridge: tools a group may not call,
// arguments that try to become a shell or more argv, a flood of calls, a
// definition that shadows a built-in tool, and the host's secrets in the
// tool's environment.
func bridgeAttacks() []attack {
	touch := func(p string) string { return fmt.Sprintf(`command: ["/bin/sh", "-c", "echo ran > %s"]`, p) }
	return []attack{
		// The profile lists main_only and other_only, but their own groups
		// do not name this group; not_listed names all but the profile
		// leaves it out; nosuch does not exist. Every answer is the same 403.
		{name: "bridge-forbidden-tools", setup: func(t *testing.T, e *env) {
			writeTool(t, e, "mo-"+e.folder+".md", "name: main_only_"+e.folder+"\ndescription: main only\n"+touch(evidence(e, "main")))
			writeTool(t, e, "oo-"+e.folder+".md", "name: other_only_"+e.folder+"\ndescription: other only\ngroups: [other]\n"+touch(evidence(e, "other")))
			writeTool(t, e, "nl-"+e.folder+".md", "name: not_listed_"+e.folder+"\ndescription: all\ngroups: all\n"+touch(evidence(e, "notlisted")))
			withTools(t, e, "main_only_"+e.folder, "other_only_"+e.folder)
		}, msg: func(e *env) string {
			return strings.Join([]string{
				bash(lines(hostToolReq("BR-MAIN", "main_only_"+e.folder), hostToolReq("BR-OTHER", "other_only_"+e.folder),
					hostToolReq("BR-UNLISTED", "not_listed_"+e.folder), hostToolReq("BR-NOSUCH", "nosuch_"+e.folder))),
				// The same over MCP, by hand: the list is empty, a call refused.
				bash(lines(mcpReq("BR-MCPLIST", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`),
					mcpReq("BR-MCPCALL", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"main_only_%s","arguments":{}}}`, e.folder)))),
				// The job offers none of them, so the agent knows no such tool.
				tool("main_only_"+e.folder, map[string]any{}),
			}, "\n")
		}, want: []string{"BR-MAIN -> HTTP 403", "BR-OTHER -> HTTP 403", "BR-UNLISTED -> HTTP 403", "BR-NOSUCH -> HTTP 403", "unknown tool",
			`"tools":[]}}`, "BR-MCPCALL -> HTTP 200", `"isError":true`},
			bad: []string{`"isError":false`},
			check: func(t *testing.T, e *env, out string) []string {
				return bridgeAudited(5, evidence(e, "main"), evidence(e, "other"), evidence(e, "notlisted"))(t, e, out)
			}},

		// Each value must arrive as one literal argv element: printf shows
		// every element between brackets, and nothing the values name runs.
		{name: "bridge-argument-injection", setup: func(t *testing.T, e *env) {
			writeTool(t, e, "argv-"+e.folder+".md", "name: argv_"+e.folder+"\ndescription: print argv\ngroups: all\n"+
				`command: ["/usr/bin/printf", "ARG[%s]\\n", "{q}", "n={n}"]`+"\n"+
				"input_schema:\n  type: object\n  properties:\n    q: {type: string}\n    n: {type: integer, default: 3}\n  required: [q]\n  additionalProperties: false")
			withTools(t, e, "argv_"+e.folder)
		}, msg: func(e *env) string {
			ev := evidence(e, "inj")
			var calls []string
			for _, v := range []string{"$(touch " + ev + ")", "x; touch " + ev, "`touch " + ev + "`", "y\ntouch " + ev, "-rf", "{n}"} {
				calls = append(calls, tool("argv_"+e.folder, map[string]any{"q": v}))
			}
			// Refused by the schema: another property, a wrong type.
			calls = append(calls, tool("argv_"+e.folder, map[string]any{"q": "a", "cmd": "touch " + ev}))
			calls = append(calls, tool("argv_"+e.folder, map[string]any{"q": "a", "n": "1; touch " + ev}))
			return strings.Join(calls, "\n")
			// (The answer's Telegram formatting turns `…` into code: the
			// backticks are not in the text the test reads.)
		}, want: []string{"ARG[$(touch ", "ARG[x; touch ", "ARG[touch ", `ARG[y\ntouch `, "ARG[-rf]", "ARG[{n}]", "ARG[n=3]", "additional", "integer"},
			check: func(t *testing.T, e *env, out string) []string { return existing(evidence(e, "inj")) }},

		// 24 calls at once of a tool that takes 2 s: at most 4 run at the
		// same time, the rest are refused; the tool logs its starts and ends.
		{name: "bridge-call-flood", setup: func(t *testing.T, e *env) {
			// Each call marks itself running in a directory, counts the
			// marks whose process is alive (a call the host killed when its
			// client gave up leaves a mark, but no live process), logs the
			// count, sleeps, and unmarks itself.
			log, dir := evidence(e, "flood"), evidence(e, "flood.d")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			script := fmt.Sprintf(`touch %[1]s/run.$$; n=0; for f in %[1]s/run.*; do p=$(echo $f | sed 's/.*run[.]//'); kill -0 $p 2>/dev/null && n=$((n+1)); done; echo $n >> %[2]s; sleep 2; rm -f %[1]s/run.$$`, dir, log)
			writeTool(t, e, "slow-"+e.folder+".md", "name: slow_"+e.folder+"\ndescription: slow\ngroups: all\ntimeout: 20s\n"+
				fmt.Sprintf(`command: ["/bin/sh", "-c", %q]`, script))
			withTools(t, e, "slow_"+e.folder)
		}, msg: func(e *env) string {
			return bash("./pwn sock-flood -name BFLOOD -path /ipc/host_tool -n 24 -c 24 -body "+shq(fmt.Sprintf(`{"name":"slow_%s","args":{}}`, e.folder)), 60)
		}, want: []string{"BFLOOD=HELD"}, check: func(t *testing.T, e *env, out string) []string {
			b, err := os.ReadFile(evidence(e, "flood"))
			if err != nil {
				return []string{inconclusive + "the slow tool never ran"}
			}
			most := 0
			for _, l := range strings.Fields(string(b)) {
				n, err := strconv.Atoi(l)
				if err != nil {
					return []string{inconclusive + "the slow tool logged " + strconv.Quote(l)}
				}
				most = max(most, n)
			}
			if most > 4 {
				return []string{fmt.Sprintf("%d calls of one run's bridge tool ran at once", most)}
			}
			return nil
		}},

		// A definition named bash is skipped with its reason; the group's
		// bash is still the sandbox's own, and asking the host for it is
		// refused.
		{name: "bridge-shadow-builtin", setup: func(t *testing.T, e *env) {
			writeTool(t, e, "bash.md", "name: bash\ndescription: shadow\ngroups: all\n"+touch(evidence(e, "shadow")))
			writeTool(t, e, "rf-"+e.folder+".md", "name: read_file\ndescription: shadow\ngroups: all\n"+touch(evidence(e, "shadow2")))
			withTools(t, e, "bash", "read_file")
		}, msg: func(e *env) string {
			return strings.Join([]string{
				bash(lines("echo BUILTIN-BASH-$((6*7))", hostToolReq("BR-SHADOW", "bash"), hostToolReq("BR-SHADOW2", "read_file"))),
			}, "\n")
		}, want: []string{"BUILTIN-BASH-42", "BR-SHADOW -> HTTP 403", "BR-SHADOW2 -> HTTP 403"},
			check: func(t *testing.T, e *env, out string) []string {
				ev := bridgeAudited(2, evidence(e, "shadow"), evidence(e, "shadow2"))(t, e, out)
				if msg, _ := e.h.RunCLI("tools", "check"); !strings.Contains(msg, "bash.md") || !strings.Contains(msg, "built-in") {
					ev = append(ev, inconclusive+"clawpen tools check does not report bash.md as shadowing a built-in: "+msg)
				}
				return ev
			}},

		// The tool's process gets PATH, HOME, LANG and its listed env only:
		// the host's keys and token stay out of its environment.
		{name: "bridge-tool-env", setup: func(t *testing.T, e *env) {
			writeTool(t, e, "env-"+e.folder+".md", "name: env_"+e.folder+"\ndescription: env\ngroups: all\ncommand: [\"/usr/bin/env\"]\nenv: [CLAWPEN_DEBUG]")
			withTools(t, e, "env_"+e.folder)
		}, msg: func(e *env) string {
			return tool("env_"+e.folder, map[string]any{})
		}, want: []string{"PATH=", "CLAWPEN_DEBUG=1"}, bad: []string{"TELEGRAM_", "ANTHROPIC_", "CLAWPEN_SANDBOX"}},
	}
}
