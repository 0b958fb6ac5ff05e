package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
)

// env is a fake host: a unix socket serving the fake provider on /v1/ and a
// scripted IPC handler on /ipc/.
type env struct {
	llm    *fakellm.Server
	opts   agent.Options
	mu     sync.Mutex
	ipc    []string // bodies received on /ipc/<name>, as "name body"
	events []domain.Event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{llm: fakellm.NewHandler()}
	mux := http.NewServeMux()
	mux.Handle("/v1/", e.llm)
	mux.HandleFunc("/ipc/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		name := strings.TrimPrefix(r.URL.Path, "/ipc/")
		e.mu.Lock()
		e.ipc = append(e.ipc, name+" "+string(body))
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if name == "register_group" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"denied: only the main group may register groups"}`)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	})

	sockDir, err := os.MkdirTemp("", "cpa") // short: unix socket paths are limited
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "host.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	root := t.TempDir()
	e.opts = agent.Options{
		WorkspaceDir: filepath.Join(root, "group"),
		GlobalDir:    filepath.Join(root, "global"),
		HomeDir:      filepath.Join(root, "home"),
		SocketPath:   sock,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Emit: func(ev domain.Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, ev)
		},
	}
	for _, d := range []string{e.opts.WorkspaceDir, e.opts.GlobalDir, e.opts.HomeDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	return e
}

func testJob(prompt string) domain.Job {
	return domain.Job{Version: domain.JobVersion, Group: "team", ChatID: -100, AssistantName: "Andy",
		Model: "claude-test", ContextMode: "group", Prompt: prompt}
}

func (e *env) run(t *testing.T, j domain.Job) string {
	t.Helper()
	out, err := agent.Run(context.Background(), j, e.opts)
	require.NoError(t, err)
	return out
}

func TestRunEcho(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.GlobalDir, "MEMORY.md"), []byte("global fact: sky is blue"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.WorkspaceDir, "MEMORY.md"), []byte("group fact: Bob likes tea"), 0o644))

	assert.Equal(t, "echo: hello & <there>", e.run(t, testJob("hello &amp; &lt;there&gt;")))

	reqs := e.llm.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Empty(t, r.Header.Get("X-Api-Key"), "the agent holds no key")
	assert.Empty(t, r.Header.Get("Authorization"))
	assert.Equal(t, "claude-test", r.Model)
	assert.Contains(t, r.System, "You are Andy")
	assert.Contains(t, r.System, "global fact: sky is blue")
	assert.Contains(t, r.System, "group fact: Bob likes tea")
	assert.Equal(t, agent.ToolNames(), r.ToolNames())
	for _, tool := range r.Tools {
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.InputSchema, &schema), tool.Name)
		assert.Equal(t, "object", schema["type"], tool.Name)
	}
}

func TestRunBashTool(t *testing.T) {
	e := newEnv(t)
	out := e.run(t, testJob(`<message sender="bob">@Andy TOOL bash {"command":"echo hi; id -u"}</message>`))
	assert.Equal(t, "results:\nhi\n"+strconv.Itoa(os.Getuid())+"\n[exit code 0]", out)
	reqs := e.llm.Requests()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	require.Len(t, last.Content, 1)
	assert.Equal(t, "tool_result", last.Content[0].Type)
	assert.Equal(t, "toolu_1", last.Content[0].ToolUseID)
}

func TestRunWriteThenRead(t *testing.T) {
	e := newEnv(t)
	out := e.run(t, testJob("TOOL write_file {\"path\":\"notes/todo.txt\",\"content\":\"buy milk\"}\nTOOL read_file {\"path\":\"notes/todo.txt\"}"))
	assert.Equal(t, "results:\nwrote 8 bytes to "+filepath.Join(e.opts.WorkspaceDir, "notes/todo.txt")+"\nbuy milk", out)
	data, err := os.ReadFile(filepath.Join(e.opts.WorkspaceDir, "notes/todo.txt"))
	require.NoError(t, err)
	assert.Equal(t, "buy milk", string(data))
}

func TestRunHostToolsAndBadCalls(t *testing.T) {
	e := newEnv(t)
	out := e.run(t, testJob(strings.Join([]string{
		`TOOL send_message {"text":"working on it"}`,
		`TOOL register_group {"chat_id":5,"name":"x","folder":"x"}`,
		`TOOL nosuch {}`,
		`TOOL bash {"cmd":"ls"}`,
	}, "\n")))
	assert.Equal(t, strings.Join([]string{
		"results:",
		`{"ok":true}`,
		"denied: only the main group may register groups",
		`unknown tool "nosuch"; available tools: ` + strings.Join(agent.ToolNames(), ", "),
		`bash: unknown argument "cmd"`,
	}, "\n"), out)
	assert.Equal(t, []string{
		`send_message {"text":"working on it"}`,
		`register_group {"chat_id":5,"name":"x","folder":"x"}`,
	}, e.ipc)
	// The refusal went back to the model flagged as an error.
	reqs := e.llm.Requests()
	res := reqs[2].Messages[len(reqs[2].Messages)-1].Content[0]
	assert.True(t, res.IsError)
}

func TestRunInternalStripped(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, "Visible answer.", e.run(t, testJob("REPLY &lt;internal&gt;private plan&lt;/internal&gt;Visible answer.")))
	assert.Equal(t, "", e.run(t, testJob("REPLY <internal>nothing to say")))
}

func TestRunResumesTranscript(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, "echo: first question", e.run(t, testJob("first question")))
	_, err := os.Stat(filepath.Join(e.opts.HomeDir, "transcript.json"))
	require.NoError(t, err)
	assert.Equal(t, "echo: second question", e.run(t, testJob("second question")))

	reqs := e.llm.Requests()
	require.Len(t, reqs, 2)
	msgs := reqs[1].Messages
	require.Len(t, msgs, 3)
	assert.Equal(t, "first question", msgs[0].Text())
	assert.Equal(t, "echo: first question", msgs[1].Text())
	assert.Equal(t, "second question", msgs[2].Text())

	runsLog, err := os.ReadFile(filepath.Join(e.opts.HomeDir, "runs.log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(runsLog), "group=team mode=group"))
}

func TestRunIsolatedNeitherLoadsNorSaves(t *testing.T) {
	e := newEnv(t)
	e.run(t, testJob("remember me"))
	before, err := os.ReadFile(filepath.Join(e.opts.HomeDir, "transcript.json"))
	require.NoError(t, err)

	j := testJob("isolated question")
	j.ContextMode = "isolated"
	assert.Equal(t, "echo: isolated question", e.run(t, j))
	reqs := e.llm.Requests()
	require.Len(t, reqs[1].Messages, 1, "isolated runs start fresh")
	after, err := os.ReadFile(filepath.Join(e.opts.HomeDir, "transcript.json"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "isolated runs do not save")
}

func TestRunIsolatedCreatesNoTranscript(t *testing.T) {
	e := newEnv(t)
	j := testJob("hi")
	j.ContextMode = "isolated"
	e.run(t, j)
	_, err := os.Stat(filepath.Join(e.opts.HomeDir, "transcript.json"))
	assert.True(t, os.IsNotExist(err))
}

func TestRunBrokenTranscriptStartsFresh(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.opts.HomeDir, "transcript.json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	assert.Equal(t, "echo: hi", e.run(t, testJob("hi")))
	_, err := os.Stat(path + ".broken")
	assert.NoError(t, err)
	_, err = os.Stat(path)
	assert.NoError(t, err)
}

func TestRunMaxTurns(t *testing.T) {
	e := newEnv(t)
	j := testJob("TOOL bash {\"command\":\"echo 1\"}\nTOOL bash {\"command\":\"echo 2\"}\nTOOL bash {\"command\":\"echo 3\"}")
	j.MaxTurns = 2
	out := e.run(t, j)
	assert.Equal(t, "[stopped: reached the limit of 2 model turns]", out)
	require.Len(t, e.llm.Requests(), 2)
	// The saved history stays valid: the next run is accepted by the provider,
	// which refuses unpaired tool_use blocks.
	assert.Equal(t, "echo: next", e.run(t, testJob("next")))
}

func TestRunStreaming(t *testing.T) {
	e := newEnv(t)
	out := e.run(t, testJob("TOOL write_file {\"path\":\"s.txt\",\"content\":\"streamed {json}\"}\nTOOL read_file {\"path\":\"s.txt\"}"))
	assert.Equal(t, "results:\nwrote 15 bytes to "+filepath.Join(e.opts.WorkspaceDir, "s.txt")+"\nstreamed {json}", out)
	for _, r := range e.llm.Requests() {
		assert.True(t, r.Stream)
	}
}

func TestRunOpenAI(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-leaked")
	e := newEnv(t)
	j := testJob("TOOL bash {\"command\":\"echo via-openai\"}")
	j.Provider = "openai"
	j.Model = "gpt-test"
	assert.Equal(t, "results:\nvia-openai\n[exit code 0]", e.run(t, j))
	j.Prompt = "plain"
	assert.Equal(t, "echo: plain", e.run(t, j))
	reqs := e.llm.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
	assert.Empty(t, reqs[0].Header.Get("Authorization"), "the agent holds no key")
	assert.Equal(t, "gpt-test", reqs[0].Model)
	assert.Contains(t, reqs[0].System, "You are Andy")
	assert.Len(t, reqs[2].Messages, 5, "the second run resumes the first one's exchange")
}

func TestRunModelErrors(t *testing.T) {
	e := newEnv(t)
	e.llm.FailNext(1, 529) // retried by the SDK
	assert.Equal(t, "echo: x", e.run(t, testJob("x")))

	e.llm.FailNext(1, 400)
	_, err := agent.Run(context.Background(), testJob("y"), e.opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injected failure")
}

func TestRunRejectsInvalidJob(t *testing.T) {
	e := newEnv(t)
	j := testJob("x")
	j.ContextMode = "sometimes"
	_, err := agent.Run(context.Background(), j, e.opts)
	require.Error(t, err)
	assert.Empty(t, e.llm.Requests())
}

func TestOptionsFromEnv(t *testing.T) {
	o := agent.OptionsFromEnv(func(k string) string {
		return map[string]string{agent.SocketEnv: "/x.sock"}[k]
	})
	assert.Equal(t, "/x.sock", o.SocketPath)
	assert.Equal(t, "/workspace/group", o.WorkspaceDir)
	d := agent.OptionsFromEnv(func(string) string { return "" })
	assert.Equal(t, "/run/clawpen/host.sock", d.SocketPath)
}

// The answer streams out as progress events, both providers, without its
// internal part; a slow model (DRIP) gives several, each longer.
func TestRunStreamsProgress(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			j := testJob("DRIP 120ms\nREPLY <internal>secret plan</internal>The answer grows, chunk by chunk, until it is complete.")
			j.Provider = provider
			assert.Equal(t, "The answer grows, chunk by chunk, until it is complete.", e.run(t, j))
			e.mu.Lock()
			defer e.mu.Unlock()
			var texts []string
			for _, ev := range e.events {
				require.Equal(t, domain.EventProgress, ev.Type)
				assert.NotContains(t, ev.Text, "secret")
				assert.NotContains(t, ev.Text, "<")
				texts = append(texts, ev.Text)
			}
			require.GreaterOrEqual(t, len(texts), 2, "%q", texts)
			for i := 1; i < len(texts); i++ {
				assert.True(t, strings.HasPrefix(texts[i], texts[i-1]) && len(texts[i]) > len(texts[i-1]), "%q", texts)
			}
		})
	}
}

// A conversation past the context budget: one summary request of the
// older turns (their tool calls and results with them), then the run's
// request carries the summary and the recent turns as they were; the
// transcript keeps that. Without the host's archive, or when the summary
// fails, nothing is replaced.
func TestLongConversationIsCompacted(t *testing.T) {
	e := newEnv(t)
	job := func(prompt string, archived bool) domain.Job {
		j := testJob(prompt)
		j.ContextTokens, j.Archived = 3000, archived
		return j
	}
	pad := strings.Repeat("words ", 500) // 3 KB: about 750 tokens a turn
	for i := 1; i <= 3; i++ {
		e.run(t, job(fmt.Sprintf(`FACT-%d %s TOOL bash {"command":"echo RESULT-%d"}`, i, pad, i), true))
	}
	before := len(e.llm.Requests())
	require.Equal(t, 6, before, "under the budget: no summary yet")

	// Past it, but the host archived nothing: kept whole.
	e.run(t, job("FACT-4 "+pad+" REPLY four", false))
	reqs := e.llm.Requests()
	require.Len(t, reqs, before+1)
	assert.Contains(t, reqs[len(reqs)-1].Messages[0].Text(), "FACT-1", "the oldest turn is still there")

	// The summary request fails: kept whole, and the run goes on.
	e.llm.FailNext(1, 400)
	e.run(t, job("FACT-5 "+pad+" REPLY five", true))
	reqs = e.llm.Requests()
	require.Len(t, reqs, before+3, "the failed summary request, then the run's")
	assert.Contains(t, reqs[len(reqs)-1].Messages[0].Text(), "FACT-1")

	e.run(t, job("FACT-6 "+pad+" REPLY six", true))
	reqs = e.llm.Requests()
	require.Len(t, reqs, before+5, "one summary request, then the run's")
	summary, run := reqs[len(reqs)-2], reqs[len(reqs)-1]
	assert.Empty(t, summary.Tools)
	text := summary.Messages[0].Text()
	for _, want := range []string{"<conversation>", "FACT-1", "[assistant runs the tool bash]", "echo RESULT-1", "[tool result]\nRESULT-1", "FACT-4"} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "FACT-6", "the recent turns are not summarised")
	first := run.Messages[0].Text()
	assert.True(t, strings.HasPrefix(first, "<conversation_summary>\nSummary of the earlier conversation. Facts: FACT-1 FACT-2 FACT-3"), first)
	last := run.Messages[len(run.Messages)-1].Text()
	assert.Contains(t, last, "FACT-6", "the prompt as it was")
	for _, m := range run.Messages {
		assert.NotContains(t, m.Text(), "RESULT-1", "the oldest tool result lives only in the summary")
	}

	saved, err := os.ReadFile(filepath.Join(e.opts.HomeDir, "transcript.json"))
	require.NoError(t, err)
	assert.Contains(t, string(saved), "conversation_summary")
	assert.NotContains(t, string(saved), "FACT-1 words", "the transcript keeps the compacted conversation")
}

// The system prompt stays within what the host adds for it when it
// reckons whether a run may compact (domain.MaxInstructionBytes, and each
// MEMORY.md at most domain.MaxMemoryBytes, with the note of a cut).
func TestSystemPromptWithinTheHostsBound(t *testing.T) {
	e := newEnv(t)
	j := testJob("hi")
	j.IsMain, j.TaskID, j.Group, j.AssistantName = true, 123456789, strings.Repeat("g", 64), strings.Repeat("A", 32)
	e.run(t, j)
	require.LessOrEqual(t, len(e.llm.Requests()[0].System), domain.MaxInstructionBytes)
	big := strings.Repeat("memory ", 10000)
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.GlobalDir, "MEMORY.md"), []byte(big), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.WorkspaceDir, "MEMORY.md"), []byte(big), 0o644))
	e.run(t, j)
	require.LessOrEqual(t, len(e.llm.Requests()[1].System), domain.MaxInstructionBytes+2*(domain.MaxMemoryBytes+128))
}
