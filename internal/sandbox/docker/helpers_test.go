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

// fixture is a throw-away project layout under /tmp: groups/<g>, groups/other,
// groups/global, data/sessions/<g>, a fake host home with a planted key.
type fixture struct {
	base, group, other, global, session, home, sock string
	b                                               *Backend
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	requireEngine(t)
	base, err := os.MkdirTemp("/tmp", "clawpen-docker-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	f := &fixture{
		base:    base,
		group:   filepath.Join(base, "groups", "team"),
		other:   filepath.Join(base, "groups", "other"),
		global:  filepath.Join(base, "groups", "global"),
		session: filepath.Join(base, "data", "sessions", "team"),
		home:    filepath.Join(base, "home", "owner"),
		sock:    filepath.Join(base, "data", "sockets", "inv.sock"),
	}
	for _, d := range []string{f.group, f.other, f.global, f.session, filepath.Join(f.home, ".ssh"), filepath.Dir(f.sock)} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(f.group, "ORIGINAL"), []byte("mine"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.other, "OTHER_GROUP_SECRET"), []byte("theirs"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.global, "MEMORY.md"), []byte("global"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.home, ".ssh", "id_rsa"), []byte("FAKE PRIVATE KEY"), 0o644))
	// What the sandbox may write belongs to uid 1000 (as the runner arranges);
	// global too, so that read-only is shown to come from the mount.
	if os.Getuid() == 0 {
		for _, d := range []string{f.group, f.global, f.session, f.other} {
			require.NoError(t, filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Chown(p, sandbox.UID, sandbox.GID)
			}))
		}
	}

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
	f.b = b
	return f
}

func (f *fixture) spec(t testing.TB) sandbox.Spec {
	return sandbox.Spec{
		InvocationID: "test-" + randomHex(t),
		Group:        "team",
		GroupDir:     f.group,
		GlobalDir:    f.global,
		SessionDir:   f.session,
		Env:          map[string]string{"TZ": "UTC", "CLAWPEN_ASSISTANT_NAME": "Andy"},
		Limits: sandbox.Limits{
			Timeout:     60 * time.Second,
			OutputBytes: 1 << 20,
			MemoryBytes: 256 << 20,
			Pids:        64,
			TmpBytes:    1 << 20,
		},
	}
}

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
