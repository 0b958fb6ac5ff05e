package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// hostImage is the tag docs/host-container.md builds.
const hostImage = "clawpen:latest"

var (
	hostImageOnce sync.Once
	hostImageErr  error
)

// buildHostImage runs what docs/host-container.md says, from the project
// root: `make build` (bin/ may be stale), then `docker build -t
// clawpen:latest .` exactly, so a .dockerignore or Dockerfile that breaks
// the documented build breaks this test.
func buildHostImage(t *testing.T) string {
	t.Helper()
	root, err := harness.Root()
	require.NoError(t, err)
	hostImageOnce.Do(func() {
		for _, args := range [][]string{{"make", "build"}, {"docker", "build", "-t", hostImage, "."}} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				hostImageErr = fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	require.NoError(t, hostImageErr)
	return root
}

// newHostRoot is the Docker host's directory the host container sees as
// /app, made as the docs say: data/ and groups/ belong to uid 1000.
func newHostRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	hostRoot, err := os.MkdirTemp("", "clawpen-e2e-hostroot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(hostRoot) })
	require.NoError(t, os.Chmod(hostRoot, 0o755))
	for _, d := range []string{"data", "groups/main", "groups/global"} {
		require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, d), 0o755))
	}
	for name, body := range files {
		p := filepath.Join(hostRoot, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	require.NoError(t, filepath.Walk(hostRoot, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 1000, 1000)
	}))
	return hostRoot
}

func newFakes(t *testing.T) (*faketg.Server, *fakellm.Server) {
	t.Helper()
	tg := faketg.New()
	t.Cleanup(tg.Close)
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	llm.SetRequiredKey(harness.APIKey)
	return tg, llm
}

func dockerSocketGID(t *testing.T) string {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat("/var/run/docker.sock", &st))
	return fmt.Sprint(st.Gid)
}

// ownerSays pushes a main-chat message and returns the nth answer (from 1).
func ownerSays(t *testing.T, tg *faketg.Server, n int, text string, logs func() string) string {
	t.Helper()
	tg.PushMessage(harness.OwnerID, "private", "", faketg.User{ID: harness.OwnerID, FirstName: "Owner"}, text)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sent, err := tg.WaitSent(ctx, harness.OwnerID, n)
	require.NoError(t, err, "no answer; host log:\n%s", logs())
	return harness.Plain(sent[n-1].Text)
}

// TestHostAsContainer builds the host image as documented, runs it as
// docs/host-container.md's `docker run` does (plus the fakes on loopback),
// and sees a main-chat message answered from a sandbox container the
// containerised host started. An allowlisted folder under the host root is
// visible in the sandbox; one outside it is refused, never bound.
func TestHostAsContainer(t *testing.T) {
	if harness.Backend() != "docker" {
		t.Skip("the host container is tested in the Docker run (CLAWPEN_E2E_SANDBOX=docker)")
	}
	buildHostImage(t)

	// The allowlist grants a folder under the root and one the container
	// sees outside it (/srv/outside, bound from a directory the engine
	// would never find at that path).
	hostRoot := newHostRoot(t, map[string]string{
		"shared/notes/README.md":               "VISIBLE-SHARED-NOTE",
		".config/clawpen/mount-allowlist.json": `{"allowedRoots":[{"path":"/app/shared"},{"path":"/srv/outside"}]}`,
	})
	outside := t.TempDir()
	require.NoError(t, os.Chmod(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "SECRET"), []byte("OUTSIDE-NEVER-BOUND"), 0o644))

	tg, llm := newFakes(t)
	name := fmt.Sprintf("clawpen-e2e-host-%d", time.Now().UnixNano())
	args := []string{"run", "-d", "--name", name, "--init",
		"-e", "CLAWPEN_HOST_ROOT=" + hostRoot,
		"--group-add", dockerSocketGID(t),
		"-v", hostRoot + ":/app",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		// The test's own: the fakes on loopback, the test image, the
		// folder outside the root.
		"--network", "host",
		"-v", outside + ":/srv/outside:ro",
		"-e", "TELEGRAM_BOT_TOKEN=" + harness.BotToken,
		"-e", "TELEGRAM_API_URL=" + tg.URL(),
		"-e", "ANTHROPIC_API_KEY=" + harness.APIKey,
		"-e", "ANTHROPIC_BASE_URL=" + llm.URL(),
		"-e", fmt.Sprintf("CLAWPEN_OWNER_ID=%d", harness.OwnerID),
		"-e", "CLAWPEN_AGENT_IMAGE=" + harness.Image,
		hostImage}
	out, err := exec.Command("docker", args...).CombinedOutput()
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
	cli := func(env []string, args ...string) (string, error) {
		a := []string{"exec"}
		for _, e := range env {
			a = append(a, "-e", e)
		}
		out, err := exec.Command("docker", append(append(a, name, "clawpen"), args...)...).CombinedOutput()
		return string(out), err
	}

	got := ownerSays(t, tg, 1, "hello from a containerised host", logs)
	assert.Contains(t, got, "hello from a containerised host")
	assert.Contains(t, logs(), "backend=docker")
	for _, r := range llm.Requests() {
		assert.Equal(t, harness.APIKey, r.Header.Get("x-api-key"))
	}

	// Under the root: granted. Outside it: refused at once.
	out2, err := cli(nil, "groups", "mount", "add", "main", "/app/shared/notes", "notes")
	require.NoError(t, err, out2)
	out2, err = cli(nil, "groups", "mount", "add", "main", "/srv/outside", "outside")
	require.Error(t, err, out2)
	assert.Contains(t, out2, "resolves to /srv/outside, outside /app (CLAWPEN_ROOT")
	// Stored anyway, as by this host before it ran in a container: every
	// run checks again.
	out2, err = cli([]string{"CLAWPEN_HOST_ROOT="}, "groups", "mount", "add", "main", "/srv/outside", "outside")
	require.NoError(t, err, out2)

	check, err := cli(nil, "mounts", "check", "main")
	require.NoError(t, err, check)
	assert.Regexp(t, `notes\s+/app/shared/notes\s+allow ro`, check)
	assert.Regexp(t, `outside\s+/srv/outside\s+REFUSED\s+not-bindable: resolves to /srv/outside, outside /app \(CLAWPEN_ROOT`, check)

	got = ownerSays(t, tg, 2, `TOOL bash {"command":"cat /workspace/extra/notes/README.md; echo; ls /workspace/extra; test -e /workspace/extra/outside && echo OUTSIDE-BOUND || echo OUTSIDE-ABSENT"}`, logs)
	assert.Contains(t, got, "VISIBLE-SHARED-NOTE")
	assert.Contains(t, got, "OUTSIDE-ABSENT")
	assert.NotContains(t, got, "OUTSIDE-BOUND")
	assert.NotContains(t, got, "OUTSIDE-NEVER-BOUND")
	assert.Regexp(t, `extra mount refused.*rule=not-bindable path=/srv/outside`, logs())

	// The sandbox containers are gone once the answers are out.
	require.NoError(t, exec.Command("docker", "stop", name).Run())
	ps, err := exec.Command("docker", "ps", "-aq", "--filter", "label=clawpen.instance=/app/data").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(ps)), "sandbox containers left")
}

// A CLAWPEN_HOST_ROOT that is not what the container mounts at /app would
// give every sandbox other folders than the host's: the host checks its own
// container's mounts and runs no agent.
func TestHostContainerRefusesAWrongHostRoot(t *testing.T) {
	if harness.Backend() != "docker" {
		t.Skip("the host container is tested in the Docker run (CLAWPEN_E2E_SANDBOX=docker)")
	}
	buildHostImage(t)
	hostRoot := newHostRoot(t, nil)
	tg, llm := newFakes(t)
	name := fmt.Sprintf("clawpen-e2e-host-%d", time.Now().UnixNano())
	out, err := exec.Command("docker", "run", "-d", "--name", name, "--init",
		"-e", "CLAWPEN_HOST_ROOT="+hostRoot+"-elsewhere",
		"--group-add", dockerSocketGID(t),
		"-v", hostRoot+":/app",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"--network", "host",
		"-e", "TELEGRAM_BOT_TOKEN="+harness.BotToken,
		"-e", "TELEGRAM_API_URL="+tg.URL(),
		"-e", "ANTHROPIC_API_KEY="+harness.APIKey,
		"-e", "ANTHROPIC_BASE_URL="+llm.URL(),
		"-e", "CLAWPEN_AGENT_IMAGE="+harness.Image,
		hostImage).CombinedOutput()
	require.NoError(t, err, "docker run: %s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })

	line := waitContainerLog(t, name, "agents will not run")
	assert.Contains(t, line, "/app/data is "+hostRoot+"/data on the Docker host, not "+hostRoot+"-elsewhere/data")
	assert.Contains(t, line, "is not what this container mounts at CLAWPEN_ROOT=/app")
}

// waitContainerLog follows a container's log until a line holds substr,
// and returns that line.
func waitContainerLog(t *testing.T, name, substr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), harness.Wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", "-f", name)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	go func() { _ = pw.CloseWithError(cmd.Wait()) }()
	defer func() { go func() { _, _ = io.Copy(io.Discard, pr) }() }()
	var seen strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			return sc.Text()
		}
		seen.WriteString(sc.Text() + "\n")
	}
	t.Fatalf("no log line holds %q (%v); log:\n%s", substr, sc.Err(), seen.String())
	return ""
}

// TestHostComposeFile brings configs/compose.yaml up with the Compose this
// machine has, as its header says, in a project directory laid out like a
// checkout (.env beside configs/). The override adds only network_mode:
// host, for the fakes on loopback, and a free port for the health endpoint;
// the settings are in .env, as a user's.
func TestHostComposeFile(t *testing.T) {
	if harness.Backend() != "docker" {
		t.Skip("the host container is tested in the Docker run (CLAWPEN_E2E_SANDBOX=docker)")
	}
	root := buildHostImage(t)
	compose, err := composeCommand()
	require.NoError(t, err)

	tg, llm := newFakes(t)
	shipped, err := os.ReadFile(filepath.Join(root, "configs", "compose.yaml"))
	require.NoError(t, err)
	proj := newHostRoot(t, map[string]string{
		"configs/compose.yaml": string(shipped),
		// On the host's network the health endpoint takes a free port, not
		// the compose file's fixed one another host on this machine may hold.
		"configs/e2e.yaml": "services:\n  clawpen:\n    network_mode: host\n    environment:\n      CLAWPEN_METRICS_ADDR: " + freeLoopbackAddr(t) + "\n",
		".env": strings.Join([]string{
			"TELEGRAM_BOT_TOKEN=" + harness.BotToken,
			"TELEGRAM_API_URL=" + tg.URL(),
			"ANTHROPIC_API_KEY=" + harness.APIKey,
			"ANTHROPIC_BASE_URL=" + llm.URL(),
			fmt.Sprintf("CLAWPEN_OWNER_ID=%d", harness.OwnerID),
			"CLAWPEN_AGENT_IMAGE=" + harness.Image,
		}, "\n") + "\n",
	})

	project := fmt.Sprintf("clawpen-e2e-%d", time.Now().UnixNano())
	run := func(args ...string) (string, error) {
		a := append(append(compose[1:], "-p", project, "-f", "configs/compose.yaml", "-f", "configs/e2e.yaml"), args...)
		cmd := exec.Command(compose[0], a...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "CLAWPEN_HOST_ROOT="+proj, "DOCKER_GID="+dockerSocketGID(t))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	logs := func() string { out, _ := run("logs", "--no-color"); return out }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("compose log:\n%s", logs())
		}
		if out, err := run("down", "--timeout", "10"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	out, err := run("up", "-d")
	require.NoError(t, err, "compose up: %s", out)

	got := ownerSays(t, tg, 1, "hello from compose", logs)
	assert.Contains(t, got, "hello from compose")
	assert.Contains(t, logs(), "backend=docker")
	// The compose file's health check (`clawpen health`, /readyz) passes:
	// Docker runs it first one interval (30s) after the start.
	id, err := run("ps", "-q", "clawpen")
	require.NoError(t, err, "compose ps: %s", id)
	var health string
	require.Eventually(t, func() bool {
		out, _ := exec.Command("docker", "inspect", "--format", "{{.State.Health.Status}}", strings.TrimSpace(id)).Output()
		health = strings.TrimSpace(string(out))
		return health == "healthy"
	}, 2*time.Minute, time.Second, "the container never became healthy (last: %q)", health)
	// What the sandbox wrote is on the Docker host, under the root.
	_, err = os.Stat(filepath.Join(proj, "data"))
	require.NoError(t, err)
}

// composeCommand is the Compose installed: the v2 plugin, else v1.
func composeCommand() ([]string, error) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return []string{"docker-compose"}, nil
	}
	return nil, errors.New("no Docker Compose: neither `docker compose` nor `docker-compose` runs (make deps installs docker-compose)")
}

// TestAgentImageHoldsNoHostBinary: the agent image (container/Dockerfile,
// built from its own context) holds no copy of the host binary, whatever
// its name, though bin/clawpen sits beside the agent in the project.
func TestAgentImageHoldsNoHostBinary(t *testing.T) {
	if harness.Backend() != "docker" {
		t.Skip("the agent image is tested in the Docker run (CLAWPEN_E2E_SANDBOX=docker)")
	}
	root := buildHostImage(t)
	var hosts [][]byte
	for _, p := range []string{filepath.Join(root, "bin", "clawpen"), filepath.Join(harness.BinDir(), "clawpen")} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		hosts = append(hosts, b)
	}
	id, err := exec.Command("docker", "create", harness.Image).Output()
	require.NoError(t, err)
	cid := strings.TrimSpace(string(id))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", cid).Run() })
	export := exec.Command("docker", "export", cid)
	stdout, err := export.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, export.Start())
	tr := tar.NewReader(stdout)
	files, agent := 0, false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		files++
		name := "/" + strings.TrimPrefix(hdr.Name, "./")
		agent = agent || name == "/usr/local/bin/clawpen-agent"
		assert.NotEqual(t, "/usr/local/bin/clawpen", name)
		if hdr.Typeflag != tar.TypeReg || (hdr.Size != int64(len(hosts[0])) && hdr.Size != int64(len(hosts[1]))) {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		for _, h := range hosts {
			assert.False(t, bytes.Equal(b, h), "%s is the host binary", name)
		}
	}
	require.NoError(t, export.Wait())
	assert.True(t, agent, "the agent is in the image")
	assert.Greater(t, files, 1000, "the whole filesystem was read")
}
