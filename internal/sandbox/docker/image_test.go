package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTar(t *testing.T) {
	data, err := ContextTar([]ContextFile{
		{Name: "rootfs/bin/tool", Mode: 0o755, Body: []byte("x")},
		{Name: "Dockerfile", Mode: 0o644, Body: []byte("FROM scratch\n")},
		{Name: "rootfs/bin/sh", Mode: 0o777, Link: "/bin/tool"},
		{Name: "rootfs/tmp", Mode: 0o1777, Dir: true},
	})
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(data))
	var got []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		entry := h.Name + " " + string(h.Typeflag) + " " + h.Linkname
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			entry += string(b)
		}
		got = append(got, strings.TrimSpace(entry))
		assert.Equal(t, int64(0), h.ModTime.Unix(), "fixed times keep the build cache valid")
	}
	assert.Equal(t, []string{
		"Dockerfile 0 FROM scratch",
		"rootfs/ 5",
		"rootfs/bin/ 5",
		"rootfs/bin/sh 2 /bin/tool",
		"rootfs/bin/tool 0 x",
		"rootfs/tmp/ 5",
	}, got)

	again, err := ContextTar([]ContextFile{
		{Name: "rootfs/tmp", Mode: 0o1777, Dir: true},
		{Name: "rootfs/bin/sh", Mode: 0o777, Link: "/bin/tool"},
		{Name: "Dockerfile", Mode: 0o644, Body: []byte("FROM scratch\n")},
		{Name: "rootfs/bin/tool", Mode: 0o755, Body: []byte("x")},
	})
	require.NoError(t, err)
	assert.Equal(t, data, again, "the same files give the same context")
}

func TestTarRejectsEscapes(t *testing.T) {
	for _, name := range []string{"../x", "a/../../x", ".", ""} {
		_, err := ContextTar([]ContextFile{{Name: name, Body: []byte("x")}})
		assert.Error(t, err, name)
	}
}

func TestCheckStatic(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", static, "github.com/clawpen/clawpen/cmd/clawpen-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+runtime.GOARCH)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, CheckStatic(static))

	// /bin/ls is dynamically linked on every Debian.
	err = CheckStatic("/bin/ls")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CGO_ENABLED=0")

	script := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	err = CheckStatic(script)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an ELF executable")
}

func engine(t *testing.T) *client.Client {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no docker engine: `docker info`: %v: %s", err, strings.TrimSpace(string(out)))
	}
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestBuildContextReportsFailure(t *testing.T) {
	cli := engine(t)
	ctx := context.Background()
	data, err := ContextTar([]ContextFile{{Name: "Dockerfile", Mode: 0o644, Body: []byte("FROM scratch\nCOPY missing /missing\n")}})
	require.NoError(t, err)
	_, err = BuildImageContext(ctx, cli, bytes.NewReader(data), client.ImageBuildOptions{Remove: true, ForceRemove: true}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "docker build failed")
	assert.Contains(t, err.Error(), "missing")
}

// TestBuild builds container/Dockerfile from the real project with a freshly
// built agent, under a throw-away tag. It needs the local base image, which
// `make image` (container/make-base.sh, root) creates; without it the test is
// skipped rather than running debootstrap.
func TestBuild(t *testing.T) {
	cli := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ok, err := imageExists(ctx, cli, defaultImageBase)
	require.NoError(t, err)
	if !ok {
		t.Skipf("base image %s missing: run container/make-base.sh once", defaultImageBase)
	}
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	agent := filepath.Join(t.TempDir(), "clawpen-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", agent, "github.com/clawpen/clawpen/cmd/clawpen-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	const tag = "clawpen-agent-buildtest:latest"
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{PruneChildren: true})
	})
	var log bytes.Buffer
	require.NoError(t, BuildImage(ctx, ImageOptions{ProjectRoot: root, AgentBin: agent, Tag: tag, Client: cli, Out: &log}), log.String())
	assert.Contains(t, log.String(), "Successfully tagged "+tag)

	// The image runs its agent as uid 1000 and has the assistant's userland.
	run := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", tag, "-c",
		"id -u; id -g; echo $HOME; pwd; test -d /run/clawpen && echo run; for c in bash git curl python3 rg jq; do command -v $c; done | wc -l; ls /var/lib/apt/lists | wc -l")
	got, err := run.CombinedOutput()
	require.NoError(t, err, string(got))
	assert.Equal(t, "1000\n1000\n/home/agent\n/workspace/group\nrun\n6\n0\n", string(got))

	err = BuildImage(ctx, ImageOptions{ProjectRoot: t.TempDir(), AgentBin: agent, Tag: tag, Client: cli})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Dockerfile")
}
