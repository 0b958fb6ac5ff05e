package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/fakellm"
)

// doctor says the sandboxes' seccomp filter is in force (it runs a trial
// sandbox under it) and that each gets a keyring of its own.
func TestDoctorReportsSeccompAndKeyring(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	dir, err := os.MkdirTemp("/tmp", "clawpen-doctor-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	cfg := config.Config{
		DataDir: filepath.Join(dir, "data"), GroupsDir: filepath.Join(dir, "groups"),
		Sandbox: "bwrap", AgentBin: "/usr/bin/true", AgentImage: "clawpen-agent:missing-for-doctor-test",
		SandboxUser: config.DefaultSandboxUser,
	}
	got := map[string]Finding{}
	for _, f := range Doctor(context.Background(), cfg) {
		got[f.Name] = f
	}
	require.Equal(t, OK, got["bwrap"].Verdict, "%+v", got["bwrap"])
	assert.Equal(t, OK, got["seccomp"].Verdict, "%+v", got["seccomp"])
	assert.Contains(t, got["seccomp"].Detail, "in force")
	assert.Equal(t, OK, got["keyring"].Verdict, "%+v", got["keyring"])
}

// doctor's one request to the provider says what is wrong in the words the
// operator acts on: the key variable to check, the URL that does not answer.
func TestProviderFinding(t *testing.T) {
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	llm.SetRequiredKey("sk-right")
	status := func(code int, body string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	anthropic := func(url, key, model string) config.Config {
		return config.Config{AnthropicBaseURL: url, AnthropicKey: key, Model: model}
	}
	openai := func(url, key, model string) config.Config {
		env := map[string]string{"OPENAI_BASE_URL": url, "OPENAI_API_KEY": key, "CLAWPEN_MODEL": model}
		cfg, err := config.FromEnv(func(k string) string { return env[k] })
		require.NoError(t, err)
		return cfg
	}
	for _, tc := range []struct {
		name    string
		cfg     config.Config
		verdict Verdict
		want    []string
	}{
		{"anthropic, right key, alias of a listed model", anthropic(llm.URL(), "sk-right", "claude-sonnet-4-5"), OK,
			[]string{"key accepted by " + llm.URL(), "model claude-sonnet-4-5 listed"}},
		{"anthropic, wrong key", anthropic(llm.URL(), "sk-wrong", "claude-test"), Fail,
			[]string{"the key is refused by the provider", "401 authentication_error", "check ANTHROPIC_API_KEY"}},
		{"openai, right key", openai(llm.URL()+"/v1", "sk-right", "gpt-4.1-mini"), OK, []string{"key accepted"}},
		{"openai, wrong key", openai(llm.URL()+"/v1", "sk-wrong", "gpt-4.1-mini"), Fail,
			[]string{"the key is refused by the provider", "check OPENAI_API_KEY"}},
		{"openai-compatible server that wants a key", openai(llm.URL()+"/v1", "", "gpt-4.1-mini"), Fail,
			[]string{"wants a key", "OPENAI_API_KEY"}},
		{"model not listed", anthropic(llm.URL(), "sk-right", "claude-nonexistent"), Warn,
			[]string{"claude-nonexistent is not among the 3", "CLAWPEN_MODEL", "claude-test"}},
		{"unreachable", anthropic("http://127.0.0.1:9", "sk-right", "m"), Fail,
			[]string{"http://127.0.0.1:9 is not reachable", "check ANTHROPIC_BASE_URL"}},
		{"not a provider", anthropic(status(404, "<html>nothing here</html>"), "sk-right", "m"), Fail,
			[]string{"404 Not Found", "check ANTHROPIC_BASE_URL"}},
		{"overloaded", anthropic(status(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "sk-right", "m"), Warn,
			[]string{"busy", "529 overloaded_error: Overloaded"}},
		{"no provider", config.Config{}, Fail, []string{"no model key", "ANTHROPIC_API_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := providerFinding(context.Background(), tc.cfg, &http.Client{Timeout: 10 * time.Second})
			assert.Equal(t, tc.verdict, f.Verdict, "%+v", f)
			for _, w := range tc.want {
				assert.Contains(t, f.Detail+" fix: "+f.Fix, w)
			}
		})
	}
}

// Where bridge tools are defined, doctor says whether a call can be
// contained in a cgroup here (a host that cannot make one refuses calls).
func TestToolsFinding(t *testing.T) {
	dir := t.TempDir()
	_, ok := toolsFinding(config.Config{ToolsDir: dir})
	assert.False(t, ok, "no tools, no finding")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.md"), []byte("---\nname: t\ndescription: x\ncommand: [/bin/true]\n---\n"), 0o600))
	f, ok := toolsFinding(config.Config{ToolsDir: dir})
	require.True(t, ok)
	assert.Equal(t, OK, f.Verdict, "%+v", f)
	assert.Contains(t, f.Detail, "1 bridge tools; each call in a cgroup of its own under /sys/fs/cgroup")
}

func TestTranscriberFinding(t *testing.T) {
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	llm.SetRequiredKey("sk-transcribe")
	cfg := func(env map[string]string) config.Config {
		c, err := config.FromEnv(func(k string) string { return env[k] })
		require.NoError(t, err)
		return c
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		verdict Verdict
		want    []string
	}{
		{"off", nil, OK, []string{"off: voice notes reach the agent as files"}},
		{"openai, key accepted", map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "CLAWPEN_TRANSCRIBE_URL": llm.URL(), "CLAWPEN_TRANSCRIBE_KEY": "sk-transcribe"}, OK,
			[]string{llm.URL() + "/v1/audio/transcriptions, model whisper-1, the key in CLAWPEN_TRANSCRIBE_KEY, at most 60 minutes a day"}},
		{"openai, key refused", map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "CLAWPEN_TRANSCRIBE_URL": llm.URL(), "OPENAI_API_KEY": "sk-wrong"}, Fail,
			[]string{"the key is refused", "the key in OPENAI_API_KEY", "check CLAWPEN_TRANSCRIBE_KEY"}},
		{"openai, unreachable", map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "CLAWPEN_TRANSCRIBE_URL": "http://127.0.0.1:9"}, Fail,
			[]string{"not reachable", "check CLAWPEN_TRANSCRIBE_URL"}},
		{"command found", map[string]string{"CLAWPEN_TRANSCRIBE": "command", "CLAWPEN_TRANSCRIBE_CMD": "sh -c {file}", "CLAWPEN_TRANSCRIBE_DAILY_MINUTES": "0"}, OK,
			[]string{"the command sh -c {file}, at most 2m0s each, no daily limit"}},
		{"command missing", map[string]string{"CLAWPEN_TRANSCRIBE": "command", "CLAWPEN_TRANSCRIBE_CMD": "/nonexistent/whisper -f {file}"}, Fail,
			[]string{"/nonexistent/whisper", "install the program"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := transcriberFinding(context.Background(), cfg(tc.env), &http.Client{Timeout: 10 * time.Second})
			assert.Equal(t, tc.verdict, f.Verdict, "%+v", f)
			for _, w := range tc.want {
				assert.Contains(t, f.Detail+" fix: "+f.Fix, w)
			}
			assert.NotContains(t, f.Detail, "sk-")
		})
	}
}
