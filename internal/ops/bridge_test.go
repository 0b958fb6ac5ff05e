package ops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/tools"
)

// setupTools is setup with a tools dir holding files, a profiles file
// giving family the profile "fam" that lists listed, and family on it.
func setupTools(t *testing.T, files map[string]string, listed ...string) (*Service, *store.Store) {
	t.Helper()
	s, st := setup(t)
	dir := t.TempDir()
	for name, fm := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("---\n"+fm+"\n---\nguidance\n"), 0o600))
	}
	quoted := make([]string, len(listed))
	for i, l := range listed {
		quoted[i] = `"` + l + `"`
	}
	prof := filepath.Join(dir, "profiles.json")
	require.NoError(t, os.WriteFile(prof, []byte(`{"profiles":{"fam":{"tools":[`+strings.Join(quoted, ",")+`]}}}`), 0o600))
	require.NoError(t, st.SetGroupProfile(context.Background(), "family", "fam"))
	s.cfg.Profiles = prof
	s.cfg.Tools = tools.NewDir(dir)
	s.cfg.ToolEnv = func(k string) string { return map[string]string{"PATH": "/usr/bin:/bin", "TOOL_KEY": "k"}[k] }
	return s, st
}

const echoTool = `description: echo
command: ["/bin/echo", "{text}"]
input_schema: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}`

func TestHostToolAuthorization(t *testing.T) {
	files := map[string]string{
		"m.md":  "name: m\n" + echoTool,
		"a.md":  "name: a\ngroups: all\n" + echoTool,
		"al.md": "name: al\ngroups: all\n" + echoTool,
		"f.md":  "name: f\ngroups: [family]\n" + echoTool,
	}
	for _, tc := range []struct {
		name   string
		c      domain.Caller
		tool   string
		status int
	}{
		{"main calls a main-only tool", mainID, "m", 200},
		{"main calls an all tool", mainID, "a", 200},
		{"main refused a family tool", mainID, "f", 403},
		{"family refused a main-only tool its profile lists", familyID, "m", 403},
		{"family calls an all tool its profile lists", familyID, "a", 200},
		{"family refused an all tool its profile leaves out", familyID, "al", 403},
		{"family calls its own listed tool", familyID, "f", 200},
		{"work (default profile) refused an all tool", domain.Caller{Group: "work", ChatID: -200, Run: "r-w"}, "a", 403},
		{"no such tool", mainID, "nosuch", 403},
		{"owner acts as main", domain.Caller{Owner: true}, "m", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, st := setupTools(t, files, "m", "a", "f")
			status, body := ask(t, s, tc.c, "host_tool", `{"name":"`+tc.tool+`","args":{"text":"hi"}}`)
			assert.Equal(t, tc.status, status, body)
			audit, err := st.AuditLog(context.Background(), 0)
			require.NoError(t, err)
			if tc.status == 200 {
				assert.Contains(t, body, `"exit_code":0`)
				assert.Contains(t, body, `"stdout":"hi\n"`)
				require.Len(t, audit, 1)
				assert.Equal(t, "allow", audit[0].Decision)
				assert.Regexp(t, `^tool \S+ args sha256:[0-9a-f]{64} exit 0 in `, audit[0].Reason)
				return
			}
			assert.Contains(t, body, `denied: no bridge tool \"`+tc.tool+`\" that this group may call`, "unknown and forbidden look alike")
			if !tc.c.Owner {
				require.Len(t, audit, 1)
				assert.Equal(t, "deny", audit[0].Decision)
				assert.Equal(t, "ipc.host_tool", audit[0].Operation)
			}
		})
	}
}

func TestHostToolArgsAndAudit(t *testing.T) {
	s, st := setupTools(t, map[string]string{"m.md": "name: m\n" + echoTool})
	for _, tc := range []struct{ body, want string }{
		{`{"name":"m","args":{"text":1}}`, "want string"},
		{`{"name":"m","args":{"text":"a","x":1}}`, "additional properties"},
		{`{"name":"m","args":{}}`, "missing property"},
		{`{"name":"m","args":{"text":"a"},"group":"other"}`, "unknown field"},
	} {
		status, body := ask(t, s, mainID, "host_tool", tc.body)
		assert.Equal(t, 400, status, tc.body)
		assert.Contains(t, body, tc.want, tc.body)
	}
	status, body := ask(t, s, mainID, "host_tool", `{"name":"m","args":{"text":"SECRET-ARG; $(id)"}}`)
	require.Equal(t, 200, status)
	assert.Contains(t, body, `SECRET-ARG; $(id)\n`)
	entries, err := st.AuditLog(context.Background(), 0)
	require.NoError(t, err)
	var all strings.Builder
	for _, e := range entries {
		all.WriteString(e.Operation + " " + e.Decision + " " + e.Reason + "\n")
	}
	assert.NotContains(t, all.String(), "SECRET-ARG", "the arguments are not stored")
	assert.Equal(t, 5, strings.Count(all.String(), "ipc.host_tool"), "every call is audited:\n%s", all.String())
}

// A run has at most MaxToolCallsPerRun calls going; the rest are refused.
func TestHostToolCallsPerRunBounded(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	s, _ := setupTools(t, map[string]string{"w.md": "name: w\ndescription: waits\ncommand: [\"/bin/sh\", \"-c\", \"while [ ! -e " + gate + " ]; do sleep 0.01; done\"]"})
	results := make(chan int, 16)
	var wg sync.WaitGroup
	for range MaxToolCallsPerRun {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _ := ask(t, s, mainID, "host_tool", `{"name":"w"}`)
			results <- status
		}()
	}
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.runs[mainID.Run] != nil && s.runs[mainID.Run].toolCalls == MaxToolCallsPerRun
	}, harnessWait, pollEvery)
	status, body := ask(t, s, mainID, "host_tool", `{"name":"w"}`)
	assert.Equal(t, 403, status)
	assert.Contains(t, body, "bridge tool calls running")
	// Another run is not held to this one's bound.
	other := mainID
	other.Run = "another-run"
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, _ := ask(t, s, other, "host_tool", `{"name":"w"}`)
		results <- st
	}()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.runs[other.Run] != nil && s.runs[other.Run].toolCalls == 1
	}, harnessWait, pollEvery)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	wg.Wait()
	for range MaxToolCallsPerRun + 1 {
		assert.Equal(t, 200, <-results)
	}
}

func TestToolsForJob(t *testing.T) {
	s, _ := setupTools(t, map[string]string{"m.md": "name: m\n" + echoTool, "a.md": "name: a\ngroups: all\n" + echoTool}, "a")
	names := func(ts []domain.JobTool) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Name)
		}
		return out
	}
	assert.Equal(t, []string{"a", "m"}, names(s.ToolsFor(mainID, domain.Profile{})))
	assert.Equal(t, []string{"a"}, names(s.ToolsFor(familyID, domain.Profile{Tools: []string{"a", "m"}})))
	assert.Empty(t, s.ToolsFor(familyID, domain.Profile{}))
	job := s.ToolsFor(mainID, domain.Profile{})[0]
	assert.Equal(t, "guidance", job.Guidance)
	assert.Contains(t, string(job.InputSchema), `"required":["text"]`)
}

const (
	harnessWait = 10 * time.Second
	pollEvery   = 10 * time.Millisecond
)

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }

// A call whose agent goes away while the command runs is killed and still
// written to the audit log.
func TestHostToolAuditedAfterCancel(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "started")
	require.NoError(t, mkfifo(fifo))
	s, st := setupTools(t, map[string]string{"w.md": "name: w\ndescription: waits\ncommand: [\"/bin/sh\", \"-c\", \"echo > " + fifo + "; sleep 30\"]"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.HostTool(ctx, mainID, "w", nil); done <- err }()
	started, err := os.ReadFile(fifo) // the command runs
	require.NoError(t, err)
	require.Equal(t, "\n", string(started))
	cancel()
	require.NoError(t, <-done)
	entries, err := st.AuditLog(context.Background(), 0)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Contains(t, entries[0].Reason, "tool w args sha256:")
	assert.Contains(t, entries[0].Reason, "exit -1")
}
