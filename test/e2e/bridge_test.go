package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

const searchKey = "search-key-e2e-on-the-host"

// copyTree copies the shipped example tools (configs/tools) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	}))
}

func writeToolFile(t *testing.T, dir, name, fm string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".md"), []byte("---\nname: "+name+"\n"+fm+"\n---\nA test tool.\n"), 0o600))
}

func toolCall(name string, args map[string]any) string {
	b, _ := json.Marshal(args)
	return "TOOL " + name + " " + string(b)
}

// Through real sandboxes: main calls the shipped web_search and notify
// (against loopback fakes holding the host's key) and gets their output;
// a tool sees only its listed environment; a tool that forks a child and
// hangs is killed with its child at its timeout; output past the cap is
// cut and said to be; an edited definition changes the next call; a
// non-main group is refused a main-only tool and allowed one that both
// the tool and its profile list, over IPC and over MCP (the go-sdk's
// client in the sandbox); the audit log holds every call and none of the
// arguments.
func TestBridgeTools(t *testing.T) {
	var mu sync.Mutex
	var searches []string
	var notes []string
	search := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Subscription-Token") != searchKey {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		searches = append(searches, r.URL.RawQuery)
		mu.Unlock()
		fmt.Fprintf(w, `{"results":[{"title":"FAKE-RESULT for %s","count":%q}]}`, r.URL.Query().Get("q"), r.URL.Query().Get("count"))
	}))
	defer search.Close()
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		notes = append(notes, r.Header.Get("Title")+": "+string(b))
		mu.Unlock()
		fmt.Fprint(w, `{"id":"NOTIFIED"}`)
	}))
	defer notify.Close()

	h := harness.New(t, harness.Options{Owner: true,
		Profiles: `{"profiles":{"toolful":{"tools":["web_search","notify"]}}}`,
		Extra: map[string]string{
			"WEB_SEARCH_KEY": searchKey, "WEB_SEARCH_URL": search.URL + "/search",
			"NOTIFY_URL":   notify.URL + "/topic",
			"E2E_TOOL_VAR": "listed-var-value", "E2E_UNLISTED_VAR": "unlisted-var-value",
		}})
	dir := filepath.Join(h.Home, ".config/clawpen/tools")
	copyTree(t, "../../configs/tools", dir)
	pidFile := filepath.Join(h.Dir, "hang.pid")
	// The listed variable's value comes back redacted (the leak guard holds
	// every value the host gives tools as a secret); its upper case shows
	// that the tool had it.
	writeToolFile(t, dir, "envdump", "description: env\nenv: [E2E_TOOL_VAR]\n"+`command: ["/bin/sh", "-c", "env; echo E2E_TOOL_VAR upper=$(echo $E2E_TOOL_VAR | tr a-z A-Z)"]`)
	writeToolFile(t, dir, "hang", "description: hangs\ntimeout: 1s\n"+fmt.Sprintf(`command: ["/bin/sh", "-c", "sleep 300 & echo $! > %s; wait"]`, pidFile))
	writeToolFile(t, dir, "big", "description: big\nmax_output: 1000\n"+`command: ["/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a"]`)
	writeToolFile(t, dir, "ver", "description: version\ncommand: [/bin/echo, TOOL-V1]")

	h.OwnerSays(strings.Join([]string{
		toolCall("web_search", map[string]any{"query": "QUERY-ARG-42 $(id)", "count": 3}),
		toolCall("notify", map[string]any{"text": "NOTE-ARG-43"}),
		toolCall("envdump", map[string]any{}),
		toolCall("hang", map[string]any{}),
		toolCall("big", map[string]any{}),
		toolCall("ver", map[string]any{}),
	}, "\n"))
	out := strings.Join(h.Replies(harness.OwnerID, 1), "\n")
	t.Logf("main's answer:\n%s", out)
	assert.Contains(t, out, `FAKE-RESULT for QUERY-ARG-42 $(id)`, "web_search's output came back")
	assert.Contains(t, out, `"count":"3"`)
	assert.Contains(t, out, `NOTIFIED`)
	mu.Lock()
	assert.Equal(t, []string{"clawpen: NOTE-ARG-43"}, notes, "notify posted the text, title defaulted")
	mu.Unlock()

	assert.Contains(t, out, "E2E_TOOL_VAR upper=LISTED-VAR-VALUE", "the listed variable reached the tool")
	assert.Contains(t, out, "E2E_TOOL_VAR=[redacted]", "its value did not reach the sandbox")
	for _, leak := range []string{"unlisted-var-value", harness.APIKey, harness.BotToken, "TELEGRAM_", "WEB_SEARCH_KEY", "listed-var-value"} {
		assert.NotContains(t, out, leak, "the tool's environment holds only PATH, HOME, LANG and its env")
	}

	assert.Contains(t, out, `"timed_out":true`)
	pidText, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the hanging tool ran")
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(st), ") Z ")
	}, 10*time.Second, 20*time.Millisecond, "the hanging tool's child %d was killed with it", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)

	assert.Contains(t, out, `"stdout":"`+strings.Repeat("a", 1000)+`"`, "stdout cut at max_output")
	assert.NotContains(t, out, strings.Repeat("a", 1001))
	assert.Contains(t, out, `"truncated":true`)
	assert.Contains(t, out, "TOOL-V1")

	// The owner edits a definition while the host runs: the next call uses it.
	writeToolFile(t, dir, "ver", "description: version\ncommand: [/bin/echo, TOOL-V2]")
	h.OwnerSays(toolCall("ver", map[string]any{}))
	assert.Contains(t, h.Replies(harness.OwnerID, 2)[1], "TOOL-V2")

	// A non-main group whose profile lists web_search and notify: web_search
	// (groups: all) is offered and runs; notify (main only) is not offered,
	// and the host refuses it when asked directly on the socket.
	h.RegisterGroup(t, "family")
	h.OwnerSays("/profile family toolful")
	h.WaitFor(harness.OwnerID, "family now runs with the profile toolful")
	curl := `curl -s --unix-socket /run/clawpen/host.sock -H 'Content-Type: application/json' -d '{"name":"notify","args":{"text":"FROM-FAMILY"}}' http://clawpen/ipc/host_tool; echo`
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+strings.Join([]string{
		toolCall("web_search", map[string]any{"query": "FAMILY-QUERY"}),
		toolCall("notify", map[string]any{"text": "FROM-FAMILY"}),
		toolCall("bash", map[string]any{"command": curl}),
	}, "\n"))
	fam := strings.Join(h.Replies(harness.GroupChat, 1), "\n")
	t.Logf("family's answer:\n%s", fam)
	assert.Contains(t, fam, "FAKE-RESULT for FAMILY-QUERY")
	assert.Contains(t, fam, `unknown tool "notify"`)
	assert.Contains(t, fam, `denied: no bridge tool "notify" that this group may call`)

	// The go-sdk's own MCP client, run inside family's sandbox, lists
	// family's tools only, calls one, and is refused notify the same way.
	client := filepath.Join(h.Dir, "groups", "family", "mcpclient")
	build := exec.Command("go", "build", "-o", client, "./mcpclient")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mcpclient: %v\n%s", err, b)
	}
	require.NoError(t, os.Chmod(client, 0o755))
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+toolCall("bash", map[string]any{"command": strings.Join([]string{
		"./mcpclient list", `./mcpclient call web_search '{"query":"MCP-QUERY"}'`, `./mcpclient call notify '{"text":"MCP-NOTE"}'`}, "; ")}))
	viaMCP := h.Replies(harness.GroupChat, 2)[1]
	t.Logf("family over MCP:\n%s", viaMCP)
	assert.Contains(t, viaMCP, "MCP-TOOL web_search")
	assert.Equal(t, 1, strings.Count(viaMCP, "MCP-TOOL "), "family's tools only")
	assert.Contains(t, viaMCP, "MCP-RESULT error=false")
	assert.Contains(t, viaMCP, "FAKE-RESULT for MCP-QUERY")
	assert.Contains(t, viaMCP, `MCP-RESULT error=true denied: no bridge tool "notify" that this group may call`)
	mu.Lock()
	assert.Len(t, notes, 1, "family's notify never ran")
	assert.Len(t, searches, 3)
	mu.Unlock()

	audit := h.AuditLog()
	t.Logf("audit:\n%s", audit)
	for _, row := range []string{"main ipc.host_tool allow tool web_search args sha256:", "main ipc.host_tool allow tool notify args sha256:",
		"main ipc.host_tool allow tool envdump args sha256:", "main ipc.host_tool allow tool hang args sha256:",
		"main ipc.host_tool allow tool big args sha256:", "family ipc.host_tool allow tool web_search args sha256:",
		"family ipc.host_tool deny tool \"notify\": tool \"notify\" is not for group \"family\""} {
		assert.Contains(t, audit, row)
	}
	assert.Regexp(t, `main ipc.host_tool allow tool hang args sha256:[0-9a-f]{64} exit -1, killed at its timeout of 1s in `, audit)
	assert.Equal(t, 2, strings.Count(audit, "allow tool ver args"), "both calls of ver")
	for _, arg := range []string{"QUERY-ARG-42", "NOTE-ARG-43", "FAMILY-QUERY", "FROM-FAMILY"} {
		assert.NotContains(t, audit, arg, "the audit log keeps a digest of the arguments, not them")
	}

	// The owner's view.
	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/tools")
	view := h.Replies(harness.OwnerID, n+1)[n]
	assert.Contains(t, view, "web_search")
	assert.Contains(t, view, "callers now: family, main")
	assert.Contains(t, view, "last error")
	list := h.CLI("tools", "list")
	assert.Contains(t, list, "notify")
	assert.Contains(t, h.CLI("tools", "run", "ver"), "TOOL-V2")
}
