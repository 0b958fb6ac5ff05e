package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.True(t, filepath.IsAbs(c.DataDir) && strings.HasSuffix(c.DataDir, "data"))
	assert.True(t, strings.HasSuffix(c.MountAllowlist, ".config/clawpen/mount-allowlist.json"))
	assert.NotContains(t, c.MountAllowlist, "~")
}

func TestMalformedValuesAreEachReported(t *testing.T) {
	_, err := FromEnv(env(map[string]string{
		"CLAWPEN_OWNER_ID":       "me",
		"CLAWPEN_ASSISTANT_NAME": "Andy Bot",
		"CLAWPEN_SANDBOX":        "chroot",
		"CLAWPEN_MAX_CONCURRENT": "0",
		"CLAWPEN_AGENT_TIMEOUT":  "forever",
		"TELEGRAM_API_URL":       "ftp://x",
		"TZ":                     "Mars/Olympus",
	}))
	require.Error(t, err)
	for _, name := range []string{"CLAWPEN_OWNER_ID", "CLAWPEN_ASSISTANT_NAME", "CLAWPEN_SANDBOX", "CLAWPEN_MAX_CONCURRENT", "CLAWPEN_AGENT_TIMEOUT", "TELEGRAM_API_URL", "TZ"} {
		assert.Contains(t, err.Error(), name)
	}
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
