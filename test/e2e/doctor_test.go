package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// doctor names each missing piece and how to fix it, and fails.
func TestDoctorSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(harness.BinDir(), "clawpen"), "doctor")
	cmd.Dir = dir
	// An image no machine has: whether this one built clawpen-agent:latest
	// must not decide whether a Docker backend is found.
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + dir, "CLAWPEN_AGENT_BIN=" + filepath.Join(dir, "missing-agent"),
		"CLAWPEN_AGENT_IMAGE=clawpen-agent:missing-for-doctor-test", "CLAWPEN_SANDBOX_USER=clawpen-doctor-missing"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "doctor must fail: %s", out)
	for _, want := range []string{
		"TELEGRAM_BOT_TOKEN is not set", "@BotFather",
		"no model key", "ANTHROPIC_API_KEY",
		"bubblewrap is not installed", "apt-get install -y bubblewrap",
		"CLAWPEN_AGENT_BIN", "make build",
		"no working sandbox backend",
	} {
		assert.Contains(t, string(out), want)
	}
	if os.Geteuid() == 0 {
		// A root host runs sandboxes only as a dedicated user: the exact command to make it.
		want := "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin clawpen-doctor-missing"
		assert.Contains(t, string(out), want)
	}
}

// doctorRig is a working set-up for doctor: fakes that answer as Telegram and
// the provider do, accepting only the harness's token and key.
type doctorRig struct {
	TG  *faketg.Server
	LLM *fakellm.Server
	Env map[string]string
}

func newDoctorRig(t *testing.T) *doctorRig {
	t.Helper()
	tg := faketg.New(faketg.WithToken(harness.BotToken))
	t.Cleanup(tg.Close)
	llm := fakellm.New()
	llm.SetRequiredKey(harness.APIKey)
	t.Cleanup(llm.Close)
	return &doctorRig{TG: tg, LLM: llm, Env: map[string]string{
		"PATH":                os.Getenv("PATH"),
		"HOME":                t.TempDir(),
		"TELEGRAM_BOT_TOKEN":  harness.BotToken,
		"TELEGRAM_API_URL":    tg.URL(),
		"ANTHROPIC_API_KEY":   harness.APIKey,
		"ANTHROPIC_BASE_URL":  llm.URL(),
		"CLAWPEN_MODEL":       "claude-test",
		"CLAWPEN_SANDBOX":     harness.Backend(),
		"CLAWPEN_AGENT_IMAGE": harness.Image,
	}}
}

// doctor runs `<exe> doctor` in dir and returns its output and exit code.
func (r *doctorRig) doctor(t *testing.T, exe, dir string) (string, int) {
	t.Helper()
	cmd := exec.Command(exe, "doctor")
	cmd.Dir = dir
	for k, v := range r.Env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err, "run doctor: %s", out)
	return string(out), 0
}

// cloneProject lays out a project as `git clone` and `make build` leave it in
// parent: bin/clawpen and bin/clawpen-agent, groups/main/, and data/ holding
// only .gitkeep (0755, as git makes directories) unless withData is false.
func cloneProject(t *testing.T, parent string, withData bool) string {
	t.Helper()
	dir := filepath.Join(parent, "clawpen")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "groups", "main"), 0o755))
	for _, b := range []string{"clawpen", "clawpen-agent"} {
		data, err := os.ReadFile(filepath.Join(harness.BinDir(), b))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", b), data, 0o755))
	}
	if withData {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "data", ".gitkeep"), nil, 0o644))
	}
	return dir
}

func failLines(out string) []string {
	var fails []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			fails = append(fails, l)
		}
	}
	return fails
}

// Wherever serve works, doctor passes: it prepares what serve prepares
// and pins what serve pins, rather than judge what serve would fix.
func TestDoctorPassesWhereServeWorks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		parentMode os.FileMode
		withData   bool
	}{
		{"a fresh clone, data/ as git made it", 0o755, true},
		{"no data dir yet", 0o755, false},
		// As root's home: the sandbox user cannot search it.
		{"a project under a directory closed to the sandbox user", 0o700, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, err := os.MkdirTemp("", "clawpen-e2e-doctor-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(parent) })
			require.NoError(t, os.Chmod(parent, tc.parentMode))
			dir := cloneProject(t, parent, tc.withData)

			rig := newDoctorRig(t)
			out, code := rig.doctor(t, filepath.Join(dir, "bin", "clawpen"), dir)
			assert.Equal(t, 0, code, "doctor must pass:\n%s", out)
			assert.Empty(t, failLines(out), "%s", out)
			assert.Contains(t, out, "@"+faketg.DefaultBotUsername, "getMe was asked")
			assert.Contains(t, out, "key accepted by "+rig.LLM.URL())
			fi, err := os.Stat(filepath.Join(dir, "data"))
			require.NoError(t, err, "doctor prepared data/ as serve does")
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			// No other host user walks into what sandboxes write.
			assert.Regexp(t, `ok +groups +\S+/groups 07[01]0`, out)
			fi, err = os.Stat(filepath.Join(dir, "groups"))
			require.NoError(t, err)
			assert.Zero(t, fi.Mode().Perm()&0o067, "groups/ is %v", fi.Mode())
		})
	}
}

// A token or key the services refuse, or a service out of reach, fails
// doctor with the one finding that says exactly what to fix.
func TestDoctorSaysWhatIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(r *doctorRig) map[string]string
		want []string
	}{
		{"wrong token", func(*doctorRig) map[string]string {
			return map[string]string{"TELEGRAM_BOT_TOKEN": "123456:not-the-bots-token"}
		}, []string{"the token is refused by Telegram", "check TELEGRAM_BOT_TOKEN"}},
		{"Telegram out of reach", func(*doctorRig) map[string]string {
			return map[string]string{"TELEGRAM_API_URL": "http://127.0.0.1:9"}
		}, []string{"http://127.0.0.1:9", "not reachable", "TELEGRAM_API_URL"}},
		{"wrong Anthropic key", func(*doctorRig) map[string]string {
			return map[string]string{"ANTHROPIC_API_KEY": "sk-ant-not-the-key"}
		}, []string{"the key is refused by the provider", "check ANTHROPIC_API_KEY"}},
		{"wrong OpenAI key", func(r *doctorRig) map[string]string {
			return map[string]string{"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "", "CLAWPEN_MODEL": "",
				"OPENAI_API_KEY": "sk-not-the-key", "OPENAI_BASE_URL": r.LLM.URL() + "/v1"}
		}, []string{"the key is refused by the provider", "check OPENAI_API_KEY"}},
		{"provider out of reach", func(*doctorRig) map[string]string {
			return map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
		}, []string{"http://127.0.0.1:9", "not reachable", "ANTHROPIC_BASE_URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newDoctorRig(t)
			rig.Env["CLAWPEN_AGENT_BIN"] = filepath.Join(harness.BinDir(), "clawpen-agent")
			for k, v := range tc.env(rig) {
				rig.Env[k] = v
			}
			out, code := rig.doctor(t, filepath.Join(harness.BinDir(), "clawpen"), t.TempDir())
			assert.Equal(t, 1, code, "doctor must fail:\n%s", out)
			assert.Len(t, failLines(out), 1, "only what is wrong fails:\n%s", out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}
}
