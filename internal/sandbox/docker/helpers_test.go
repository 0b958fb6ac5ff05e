package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// testImageTag is built in TestMain FROM scratch: the static agent and
// busybox. CLAWPEN_TEST_IMAGE=clawpen-agent:latest runs the tests against the
// real image instead.
const testImageTag = "clawpen-agent-test:latest"

var (
	// skipReason is why the engine tests cannot run here ("" when they can).
	skipReason string
	testImage  string
	realImage  bool // CLAWPEN_TEST_IMAGE chose a prebuilt (Debian) image
	// runLabel marks this test process's containers, so that a concurrent
	// `go test` of this package neither removes nor counts them.
	runLabel = "clawpen.test=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
)

func TestMain(m *testing.M) {
	if err := setupEngine(); err != nil {
		skipReason = err.Error()
		fmt.Fprintln(os.Stderr, "docker tests skipped:", skipReason)
	}
	code := m.Run()
	if skipReason == "" {
		// No test may leave a sandbox container behind.
		if left := leftovers(""); len(left) > 0 {
			fmt.Fprintln(os.Stderr, "FAIL: clawpen containers left behind:", left)
			code = 1
		}
	}
	os.Exit(code)
}

func setupEngine() error {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("`docker info` failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if img := os.Getenv("CLAWPEN_TEST_IMAGE"); img != "" {
		testImage, realImage = img, true
		return nil
	}
	testImage = testImageTag
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return buildTestImage(ctx)
}

// buildTestImage builds a minimal image: busybox-static with its applets as
// symlinks, the static clawpen-agent, an /etc/passwd naming uid 1000 agent.
func buildTestImage(ctx context.Context) error {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox not found (apt-get install busybox-static): %w", err)
	}
	if err := CheckStatic(busybox); err != nil {
		return fmt.Errorf("busybox must be static (apt-get install busybox-static): %w", err)
	}
	list, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("busybox --list-full: %w", err)
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("read busybox: %w", err)
	}

	dir, err := os.MkdirTemp("", "clawpen-agent-build-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	agentBin := filepath.Join(dir, "clawpen-agent")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", agentBin, "github.com/clawpen/clawpen/cmd/clawpen-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build clawpen-agent: %v: %s", err, out)
	}
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return fmt.Errorf("read agent: %w", err)
	}

	files := []ContextFile{
		{Name: "Dockerfile", Mode: 0o644, Body: []byte(`FROM scratch
COPY rootfs/ /
USER 1000:1000
WORKDIR /workspace/group
ENTRYPOINT ["/usr/local/bin/clawpen-agent"]
`)},
		{Name: "rootfs/bin/busybox", Mode: 0o755, Body: bb},
		{Name: "rootfs/usr/local/bin/clawpen-agent", Mode: 0o755, Body: agent},
		{Name: "rootfs/etc/passwd", Mode: 0o644, Body: []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n")},
		{Name: "rootfs/etc/group", Mode: 0o644, Body: []byte("root:x:0:\nagent:x:1000:\n")},
		{Name: "rootfs/tmp", Mode: 0o1777, Dir: true},
		{Name: "rootfs/home/agent", Mode: 0o700, Dir: true},
		{Name: "rootfs/workspace/group", Mode: 0o755, Dir: true},
		{Name: "rootfs/run/clawpen", Mode: 0o755, Dir: true},
	}
	for _, p := range strings.Fields(string(list)) {
		if p == "bin/busybox" {
			continue
		}
		files = append(files, ContextFile{Name: "rootfs/" + p, Mode: 0o777, Link: "/bin/busybox"})
	}
	tarball, err := ContextTar(files)
	if err != nil {
		return err
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	var out bytes.Buffer
	if _, err := BuildImageContext(ctx, cli, bytes.NewReader(tarball), client.ImageBuildOptions{
		Tags: []string{testImageTag}, Remove: true, ForceRemove: true,
	}, &out); err != nil {
		return fmt.Errorf("build %s: %w\n%s", testImageTag, err, out.String())
	}
	return nil
}

func requireEngine(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip("no docker engine: " + skipReason)
	}
}

// leftovers lists clawpen containers (of one invocation, or all when "").
func leftovers(invocation string) []string {
	inv := "label=" + LabelInvocation
	if invocation != "" {
		inv += "=" + invocation
	}
	args := []string{"ps", "-a", "-q", "--filter", inv, "--filter", "label=" + runLabel}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		return []string{"docker ps failed: " + err.Error()}
	}
	return strings.Fields(string(out))
}

// fixture is a backend over a throw-away layout (sandboxtest.Layout).
type fixture struct {
	*sandboxtest.Layout
	b *Backend
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	requireEngine(t)
	return &fixture{Layout: sandboxtest.NewLayout(t, "docker"), b: testBackend(t, mod)}
}

// testBackend makes a backend of the test image that runs /bin/true unless
// told otherwise, and sees only this test process's containers.
func testBackend(t testing.TB, mod func(*Config)) *Backend {
	t.Helper()
	requireEngine(t)
	cfg := Config{Image: testImage, Command: []string{"/bin/true"}}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	k, v, _ := strings.Cut(runLabel, "=")
	b.scope = map[string]string{k: v}
	return b
}

func (f *fixture) spec(testing.TB) sandbox.Spec { return f.Spec() }

type outcome struct {
	res    sandbox.Result
	stdout string
	err    error
}

// sh runs script with /bin/sh -c inside the sandbox and checks that the
// container is gone afterwards.
func (f *fixture) sh(t testing.TB, spec sandbox.Spec, script string) outcome {
	t.Helper()
	return f.cmd(t, spec, "/bin/sh", "-c", script)
}

func (f *fixture) cmd(t testing.TB, spec sandbox.Spec, command ...string) outcome {
	t.Helper()
	var out bytes.Buffer
	if spec.Stdout == nil {
		spec.Stdout = &out
	}
	res, err := f.b.run(context.Background(), spec, command)
	require.Empty(t, leftovers(spec.InvocationID), "container of %s left behind", spec.InvocationID)
	return outcome{res: res, stdout: out.String(), err: err}
}

func randomHex(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}
