package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, "https://api.telegram.org", c.TelegramAPIURL)
	assert.Equal(t, "Andy", c.AssistantName)
	assert.Equal(t, "auto", c.Sandbox)
	assert.Equal(t, "clawpen-agent:latest", c.AgentImage)
	assert.Equal(t, 3, c.MaxConcurrent)
	assert.Equal(t, 10*time.Minute, c.AgentTimeout)
	assert.Equal(t, int64(0), c.MaxTokens, "the proxy's default")
	assert.True(t, filepath.IsAbs(c.DataDir) && strings.HasSuffix(c.DataDir, "data"))
	assert.True(t, strings.HasSuffix(c.MountAllowlist, ".config/clawpen/mount-allowlist.json"))
	assert.NotContains(t, c.MountAllowlist, "~")
	assert.False(t, c.Debug)
	assert.Empty(t, c.DockerRuntime)
	assert.Equal(t, []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}, c.RetryBackoff)
	assert.Equal(t, time.Minute, c.MinInterval)
	assert.Equal(t, domain.DefaultSenderPolicy, c.SenderPolicy)
}

// The variables that app and cli read themselves before, typed here.
func TestHostSettings(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"CLAWPEN_DEBUG":          "1",
		"CLAWPEN_DOCKER_RUNTIME": "runsc",
		"CLAWPEN_RETRY_BACKOFF":  "0s, 1s,2m",
		"CLAWPEN_MIN_INTERVAL":   "5s",
		"CLAWPEN_SENDER_POLICY":  `{"allow":[7001],"mode":"drop"}`,
	}))
	require.NoError(t, err)
	assert.True(t, c.Debug)
	assert.Equal(t, "runsc", c.DockerRuntime)
	assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Minute}, c.RetryBackoff)
	assert.Equal(t, 5*time.Second, c.MinInterval)
	assert.Equal(t, domain.SenderPolicy{Users: map[int64]bool{7001: true}, Mode: domain.SenderModeDrop}, c.SenderPolicy)

	c, err = FromEnv(env(map[string]string{"CLAWPEN_DEBUG": "0"}))
	require.NoError(t, err)
	assert.False(t, c.Debug, "0 is off, not merely set")
}

func TestMalformedValuesAreEachReported(t *testing.T) {
	_, err := FromEnv(env(map[string]string{
		"CLAWPEN_OWNER_ID":       "me",
		"CLAWPEN_ASSISTANT_NAME": "Andy Bot",
		"CLAWPEN_SANDBOX":        "chroot",
		"CLAWPEN_MAX_CONCURRENT": "0",
		"CLAWPEN_AGENT_TIMEOUT":  "forever",
		"CLAWPEN_DISK_MB":        "-5",
		"CLAWPEN_EGRESS_MB":      "0",
		"CLAWPEN_MAX_FILE_MB":    "0",
		"CLAWPEN_MAX_TOKENS":     "-5",
		"TELEGRAM_API_URL":       "ftp://x",
		"TZ":                     "Mars/Olympus",
		"CLAWPEN_DEBUG":          "yes please",
		"CLAWPEN_DOCKER_RUNTIME": "runsc --debug",
		"CLAWPEN_RETRY_BACKOFF":  "5s,soon",
		"CLAWPEN_MIN_INTERVAL":   "500ms",
		"CLAWPEN_SENDER_POLICY":  `{"allow":"everyone"}`,
		"CLAWPEN_CLOCK_OFFSET":   "tomorrow",
	}))
	require.Error(t, err)
	for _, name := range []string{"CLAWPEN_OWNER_ID", "CLAWPEN_ASSISTANT_NAME", "CLAWPEN_SANDBOX", "CLAWPEN_MAX_CONCURRENT", "CLAWPEN_AGENT_TIMEOUT", "CLAWPEN_DISK_MB", "CLAWPEN_EGRESS_MB", "CLAWPEN_MAX_TOKENS", "TELEGRAM_API_URL", "TZ",
		"CLAWPEN_MAX_FILE_MB", "CLAWPEN_DEBUG", "CLAWPEN_DOCKER_RUNTIME", "CLAWPEN_RETRY_BACKOFF", "CLAWPEN_MIN_INTERVAL", "CLAWPEN_SENDER_POLICY", "CLAWPEN_CLOCK_OFFSET"} {
		assert.Contains(t, err.Error(), name)
	}
}

func TestEgressMB(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, int64(DefaultEgressMB), c.EgressMB)
	c, err = FromEnv(env(map[string]string{"CLAWPEN_EGRESS_MB": "5"}))
	require.NoError(t, err)
	assert.Equal(t, int64(5), c.EgressMB)
}

func TestMaxFileMB(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, int64(20), c.MaxFileMB)
	c, err = FromEnv(env(map[string]string{"CLAWPEN_MAX_FILE_MB": "2"}))
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.MaxFileMB)
}

func TestMaxTokens(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"CLAWPEN_MAX_TOKENS": "4096"}))
	require.NoError(t, err)
	assert.Equal(t, int64(4096), c.MaxTokens)
}

func TestRequireServe(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	err = c.RequireServe()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TELEGRAM_BOT_TOKEN")
	assert.Contains(t, err.Error(), "ANTHROPIC_API_KEY")

	c, err = FromEnv(env(map[string]string{"TELEGRAM_BOT_TOKEN": "1:x", "OPENAI_API_KEY": "k"}))
	require.NoError(t, err)
	require.NoError(t, c.RequireServe())
	assert.Equal(t, "openai", c.Provider())
}

func TestProviderAndDefaultModel(t *testing.T) {
	for _, tc := range []struct {
		name          string
		env           map[string]string
		provider      string
		model         string
		serveRefusals bool
	}{
		{"anthropic key", map[string]string{"ANTHROPIC_API_KEY": "a"}, "anthropic", DefaultModel, false},
		{"both keys: anthropic", map[string]string{"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, "anthropic", DefaultModel, false},
		{"only openai: an openai model", map[string]string{"OPENAI_API_KEY": "o"}, "openai", DefaultOpenAIModel, false},
		{"key-less local server", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "openai", DefaultOpenAIModel, false},
		{"model named", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "CLAWPEN_MODEL": "llama3.2"}, "openai", "llama3.2", false},
		{"nothing", nil, "anthropic", DefaultModel, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"TELEGRAM_BOT_TOKEN": "1:x"}
			for k, v := range tc.env {
				e[k] = v
			}
			c, err := FromEnv(env(e))
			require.NoError(t, err)
			assert.Equal(t, tc.provider, c.Provider())
			assert.Equal(t, tc.model, c.Model)
			assert.Equal(t, tc.serveRefusals, c.RequireServe() != nil)
		})
	}
}

func TestSandboxEnvHoldsNoSecret(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"TELEGRAM_BOT_TOKEN": "1:tok", "ANTHROPIC_API_KEY": "sk-secret", "OPENAI_API_KEY": "sk-other", "TZ": "Europe/Berlin",
	}))
	require.NoError(t, err)
	se := c.SandboxEnv()
	for k, v := range se {
		assert.NotContains(t, v, "secret")
		assert.NotContains(t, v, "tok")
		assert.NotContains(t, k, "KEY")
		assert.NotContains(t, k, "TOKEN")
	}
	assert.Equal(t, "Europe/Berlin", se["TZ"])
}

// CLAWPEN_DATABASE_URL is a postgres:// URL; a malformed one is refused
// without its value, which may carry a password; it is a secret a sandbox
// never gets, even when listed in CLAWPEN_SANDBOX_ENV.
func TestDatabaseURL(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Empty(t, c.DatabaseURL, "SQLite by default")

	const u = "postgres://clawpen:hunter2hunter2@db:5432/clawpen?password=ignored"
	c, err = FromEnv(env(map[string]string{"CLAWPEN_DATABASE_URL": u, "CLAWPEN_SANDBOX_ENV": "CLAWPEN_DATABASE_URL"}))
	require.NoError(t, err)
	assert.Equal(t, u, c.DatabaseURL)
	assert.Equal(t, "hunter2hunter2", c.DatabasePassword())
	assert.NotContains(t, c.SandboxEnv(), "CLAWPEN_DATABASE_URL")
	c, err = FromEnv(env(map[string]string{"CLAWPEN_DATABASE_URL": "postgresql://db/clawpen?password=s3cret-in-query"}))
	require.NoError(t, err)
	assert.Equal(t, "s3cret-in-query", c.DatabasePassword())

	for _, bad := range []string{"mysql://u:pw-secret@db/x", "db.example:5432", "host=db password=pw-secret", "postgres:pw-secret"} {
		_, err := FromEnv(env(map[string]string{"CLAWPEN_DATABASE_URL": bad}))
		require.ErrorContains(t, err, "CLAWPEN_DATABASE_URL", bad)
		assert.NotContains(t, err.Error(), "pw-secret")
	}
}

func TestDotEnvDoesNotOverrideEnvironment(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".env")
	require.NoError(t, os.WriteFile(p, []byte("CLAWPEN_TEST_A=file\nCLAWPEN_TEST_B=file\n"), 0o600))
	t.Setenv("CLAWPEN_TEST_A", "env")
	require.NoError(t, LoadDotEnv(p))
	assert.Equal(t, "env", os.Getenv("CLAWPEN_TEST_A"))
	assert.Equal(t, "file", os.Getenv("CLAWPEN_TEST_B"))
	os.Unsetenv("CLAWPEN_TEST_B")
	require.NoError(t, LoadDotEnv(filepath.Join(dir, "missing")))
}

func TestPassEnvNeverCarriesSecrets(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"CLAWPEN_SANDBOX_ENV": "GIT_AUTHOR_NAME, GITHUB_TOKEN ,AWS_SECRET_ACCESS_KEY,EDITOR",
		"GIT_AUTHOR_NAME":     "Andy", "GITHUB_TOKEN": "ghp_x", "AWS_SECRET_ACCESS_KEY": "aws", "EDITOR": "vi",
	}))
	require.NoError(t, err)
	se := c.SandboxEnv()
	assert.Equal(t, "Andy", se["GIT_AUTHOR_NAME"])
	assert.Equal(t, "vi", se["EDITOR"])
	assert.NotContains(t, se, "GITHUB_TOKEN")
	assert.NotContains(t, se, "AWS_SECRET_ACCESS_KEY")
	assert.Equal(t, []string{"GIT_AUTHOR_NAME", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "EDITOR"}, c.PassEnv)

	_, err = FromEnv(env(map[string]string{"CLAWPEN_SANDBOX_ENV": "BAD-NAME"}))
	assert.ErrorContains(t, err, "CLAWPEN_SANDBOX_ENV")
}

func TestDebugAddrIsLoopbackOnly(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Empty(t, c.DebugAddr, "off by default")

	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"127.1.2.3:0", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{"LOCALHOST:6060", true},
		{":6060", false}, // every interface
		{"0.0.0.0:6060", false},
		{"[::]:6060", false},
		{"192.168.1.5:6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"localhost.example.com:6060", false},
		{"[fe80::1%eth0]:6060", false},
		{"127.0.0.1", false}, // no port
		{"127.0.0.1:http", false},
		{"127.0.0.1:70000", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			c, err := FromEnv(env(map[string]string{"CLAWPEN_DEBUG_ADDR": tc.addr}))
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, tc.addr, c.DebugAddr)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "CLAWPEN_DEBUG_ADDR")
		})
	}
}

// Every variable FromEnv reads is in configs/.env.example, right under a
// comment that says what it does.
func TestEveryVariableIsInTheExample(t *testing.T) {
	read := map[string]bool{}
	_, err := FromEnv(func(name string) string { read[name] = true; return "" })
	require.NoError(t, err)
	require.NotEmpty(t, read)

	raw, err := os.ReadFile("../../configs/.env.example")
	require.NoError(t, err)
	lines := strings.Split(string(raw), "\n")
	isVar := regexp.MustCompile(`^#?([A-Z][A-Z0-9_]*)=`)
	documented := map[string]bool{}
	for i, l := range lines {
		m := isVar.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if i > 0 && strings.HasPrefix(lines[i-1], "# ") {
			documented[m[1]] = true
		}
	}
	for name := range read {
		assert.True(t, documented[name], "%s is not in configs/.env.example under a comment", name)
	}
}

// TestDirsAreResolvedAtStart: the data and groups dirs are resolved once,
// so that later opens below them can refuse any symlink; a part that does
// not exist yet is kept as written.
func TestDirsAreResolvedAtStart(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(base, "real", "project"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")))
	c, err := FromEnv(env(map[string]string{
		"CLAWPEN_DATA_DIR":   filepath.Join(base, "link", "project", "data"),
		"CLAWPEN_GROUPS_DIR": filepath.Join(base, "link", "project"),
	}))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(base, "real", "project", "data"), c.DataDir)
	assert.Equal(t, filepath.Join(base, "real", "project"), c.GroupsDir)
}

func TestHostRoot(t *testing.T) {
	for _, tc := range []struct {
		name           string
		env            map[string]string
		root, hostRoot string
		err            string
	}{
		{name: "bare host", env: map[string]string{}},
		{name: "the image's CLAWPEN_ROOT alone maps nothing", env: map[string]string{"CLAWPEN_ROOT": "/app"}},
		{name: "mapped", env: map[string]string{"CLAWPEN_ROOT": "/app/", "CLAWPEN_HOST_ROOT": "/srv/clawpen",
			"CLAWPEN_DATA_DIR": "/app/data", "CLAWPEN_GROUPS_DIR": "/app/groups"}, root: "/app", hostRoot: "/srv/clawpen"},
		{name: "host root without root", env: map[string]string{"CLAWPEN_HOST_ROOT": "/srv/clawpen"}, err: "want two absolute paths"},
		{name: "relative host root", env: map[string]string{"CLAWPEN_ROOT": "/app", "CLAWPEN_HOST_ROOT": "srv"}, err: "want two absolute paths"},
		{name: "data dir outside root", env: map[string]string{"CLAWPEN_ROOT": "/app", "CLAWPEN_HOST_ROOT": "/srv/clawpen",
			"CLAWPEN_DATA_DIR": "/data", "CLAWPEN_GROUPS_DIR": "/app/groups"}, err: "CLAWPEN_DATA_DIR=/data is outside CLAWPEN_ROOT=/app"},
		{name: "groups dir beside root", env: map[string]string{"CLAWPEN_ROOT": "/app", "CLAWPEN_HOST_ROOT": "/srv/clawpen",
			"CLAWPEN_DATA_DIR": "/app/data", "CLAWPEN_GROUPS_DIR": "/app2/groups"}, err: "CLAWPEN_GROUPS_DIR=/app2/groups is outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(env(tc.env))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.root, c.Root)
			assert.Equal(t, tc.hostRoot, c.HostRoot)
		})
	}
}

// CLAWPEN_TOOLS_DIR defaults under $HOME; a tool's listed variables are
// read from the environment the configuration came from, and only then.
func TestToolsDirAndHostEnv(t *testing.T) {
	t.Setenv("HOME", "/home/owner")
	c, err := FromEnv(env(map[string]string{"WEB_SEARCH_KEY": "k1"}))
	require.NoError(t, err)
	assert.Equal(t, "/home/owner/.config/clawpen/tools", c.ToolsDir)
	assert.Equal(t, "k1", c.HostEnv("WEB_SEARCH_KEY"))
	assert.Equal(t, "", c.HostEnv("UNSET_VAR"))
	assert.Equal(t, "", Config{}.HostEnv("WEB_SEARCH_KEY"), "a Config not read from an environment gives none")

	c, err = FromEnv(env(map[string]string{"CLAWPEN_TOOLS_DIR": "/etc/clawpen/tools"}))
	require.NoError(t, err)
	assert.Equal(t, "/etc/clawpen/tools", c.ToolsDir)
}

// The transcriber's settings: the key is CLAWPEN_TRANSCRIBE_KEY, else
// OPENAI_API_KEY, never ANTHROPIC_API_KEY; OpenAI's own server needs one.
func TestTranscriber(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string
		key  string
		cmd  []string
	}{
		{name: "off by default", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}},
		{name: "openai with only the Anthropic key", env: map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "ANTHROPIC_API_KEY": "sk-ant"},
			err: "needs OPENAI_API_KEY or CLAWPEN_TRANSCRIBE_KEY"},
		{name: "openai key", env: map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "OPENAI_API_KEY": "sk-oai"}, key: "sk-oai"},
		{name: "its own key wins", env: map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "OPENAI_API_KEY": "sk-oai", "CLAWPEN_TRANSCRIBE_KEY": "gsk-groq"}, key: "gsk-groq"},
		{name: "a local server without key", env: map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "CLAWPEN_TRANSCRIBE_URL": "http://127.0.0.1:8080/"}},
		{name: "bad url", env: map[string]string{"CLAWPEN_TRANSCRIBE": "openai", "CLAWPEN_TRANSCRIBE_URL": "ftp://x", "CLAWPEN_TRANSCRIBE_KEY": "k"}, err: "CLAWPEN_TRANSCRIBE_URL"},
		{name: "command", env: map[string]string{"CLAWPEN_TRANSCRIBE": "command", "CLAWPEN_TRANSCRIBE_CMD": "whisper-cli -nt -f {file}"},
			cmd: []string{"whisper-cli", "-nt", "-f", "{file}"}},
		{name: "command without file", env: map[string]string{"CLAWPEN_TRANSCRIBE": "command", "CLAWPEN_TRANSCRIBE_CMD": "whisper-cli"}, err: "CLAWPEN_TRANSCRIBE_CMD: want {file}"},
		{name: "unknown mode", env: map[string]string{"CLAWPEN_TRANSCRIBE": "whisper"}, err: `CLAWPEN_TRANSCRIBE="whisper"`},
		{name: "bad limit", env: map[string]string{"CLAWPEN_TRANSCRIBE_DAILY_MINUTES": "-1"}, err: "CLAWPEN_TRANSCRIBE_DAILY_MINUTES"},
		{name: "bad timeout", env: map[string]string{"CLAWPEN_TRANSCRIBE_TIMEOUT": "0s"}, err: "CLAWPEN_TRANSCRIBE_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(env(tc.env))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.key, c.TranscribeKey)
			assert.Equal(t, tc.cmd, c.TranscribeCmd)
			assert.NotContains(t, c.TranscribeURL+c.TranscribeKey, "sk-ant")
		})
	}
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, int64(3600), c.TranscribeDailySeconds)
	assert.Equal(t, DefaultTranscribeURL, c.TranscribeURL)
}
