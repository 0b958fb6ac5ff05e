package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		"CLAWPEN_AGENT_IMAGE=clawpen-agent:missing-for-doctor-test"}
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
}
