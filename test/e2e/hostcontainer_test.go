package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// TestHostAsContainer builds the host image (top-level Dockerfile), runs it
// with the Docker socket against the fakes, and sees a main-chat message
// answered from a sandbox container the containerised host started.
func TestHostAsContainer(t *testing.T) {
	if harness.Backend() != "docker" {
		t.Skip("the host container is tested in the Docker run (CLAWPEN_E2E_SANDBOX=docker)")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)

	// Build context: the Dockerfile and the binaries this test run built.
	bctx := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(bctx, "bin"), 0o755))
	copyFile(t, filepath.Join(root, "Dockerfile"), filepath.Join(bctx, "Dockerfile"))
	copyFile(t, filepath.Join(harness.BinDir(), "clawpen"), filepath.Join(bctx, "bin", "clawpen"))
	copyFile(t, filepath.Join(harness.BinDir(), "clawpen-agent"), filepath.Join(bctx, "bin", "clawpen-agent"))
	const tag = "clawpen-host:e2e"
	out, err := exec.Command("docker", "build", "-q", "-t", tag, bctx).CombinedOutput()
	require.NoError(t, err, "docker build: %s", out)

	// The Docker host's directory that the container sees as /app.
	hostRoot, err := os.MkdirTemp("", "clawpen-e2e-hostroot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(hostRoot) })
	require.NoError(t, os.Chmod(hostRoot, 0o755))
	for _, d := range []string{"data", "groups/main", "groups/global"} {
		require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, d), 0o755))
	}
	require.NoError(t, filepath.Walk(hostRoot, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 1000, 1000)
	}))

	tg := faketg.New()
	defer tg.Close()
	llm := fakellm.New()
	defer llm.Close()
	llm.SetRequiredKey(harness.APIKey)

	var st syscall.Stat_t
	require.NoError(t, syscall.Stat("/var/run/docker.sock", &st))
	name := fmt.Sprintf("clawpen-e2e-host-%d", time.Now().UnixNano())
	args := []string{"run", "-d", "--name", name, "--init", "--network", "host",
		"--group-add", fmt.Sprint(st.Gid),
		"-v", filepath.Join(hostRoot, "data") + ":/app/data",
		"-v", filepath.Join(hostRoot, "groups") + ":/app/groups",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-e", "CLAWPEN_HOST_ROOT=" + hostRoot,
		"-e", "TELEGRAM_BOT_TOKEN=" + harness.BotToken,
		"-e", "TELEGRAM_API_URL=" + tg.URL(),
		"-e", "ANTHROPIC_API_KEY=" + harness.APIKey,
		"-e", "ANTHROPIC_BASE_URL=" + llm.URL(),
		"-e", fmt.Sprintf("CLAWPEN_OWNER_ID=%d", harness.OwnerID),
		"-e", "CLAWPEN_AGENT_IMAGE=" + harness.Image,
		tag}
	out, err = exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker run: %s", out)
	logs := func() string {
		b, _ := exec.Command("docker", "logs", name).CombinedOutput()
		return string(b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host container log:\n%s", logs())
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})

	tg.PushMessage(harness.OwnerID, "private", "", faketg.User{ID: harness.OwnerID, FirstName: "Owner"}, "hello from a containerised host")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sent, err := tg.WaitSent(ctx, harness.OwnerID, 1)
	require.NoError(t, err, "no answer; host log:\n%s", logs())
	assert.Contains(t, harness.Plain(sent[0].Text), "hello from a containerised host")
	assert.Contains(t, logs(), "backend=docker")
	for _, r := range llm.Requests() {
		assert.Equal(t, harness.APIKey, r.Header.Get("x-api-key"))
	}

	// The sandbox container is gone once the answer is out.
	require.NoError(t, exec.Command("docker", "stop", name).Run())
	ps, err := exec.Command("docker", "ps", "-aq", "--filter", "label=clawpen.instance=/app/data").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(ps)), "sandbox containers left")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o755))
}
