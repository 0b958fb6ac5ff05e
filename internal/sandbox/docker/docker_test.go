package docker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

func TestCheckMissingImage(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Image = "clawpen-agent-missing:latest" })
	err := f.b.Check(context.Background())
	require.Error(t, err)
	assert.Equal(t, "image clawpen-agent-missing:latest not found: run `make image` (or clawpen image build)", err.Error())
}

func TestCheckMissingRuntime(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Runtime = "no-such-runtime" })
	err := f.b.Check(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `docker runtime "no-such-runtime" is not configured`)
}

func TestNewUnreachableEngine(t *testing.T) {
	_, err := New(context.Background(), Config{Host: "unix:///nonexistent/docker.sock"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "docker engine not reachable")
}

// TestAPINegotiated checks that the client speaks the engine's version when
// the engine is older than the client (here: Engine 20.10, API 1.41).
func TestAPINegotiated(t *testing.T) {
	f := newFixture(t, nil)
	out, err := exec.Command("docker", "version", "--format", "{{.Server.APIVersion}}").Output()
	require.NoError(t, err)
	engine := strings.TrimSpace(string(out))
	if versionLess(engine, client.MaxAPIVersion) {
		assert.Equal(t, engine, f.b.APIVersion())
	} else {
		assert.Equal(t, client.MaxAPIVersion, f.b.APIVersion())
	}
}

func versionLess(a, b string) bool {
	pa, pb := strings.SplitN(a, ".", 2), strings.SplitN(b, ".", 2)
	ma, _ := strconv.Atoi(pa[0])
	mb, _ := strconv.Atoi(pb[0])
	if ma != mb {
		return ma < mb
	}
	na, _ := strconv.Atoi(pa[1])
	nb, _ := strconv.Atoi(pb[1])
	return na < nb
}

// TestAgentRuns runs the image's own agent: it answers "ready" first, then an
// error for a job it cannot parse.
func TestAgentRuns(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Command = nil })
	spec := f.spec(t)
	spec.Stdin = []byte("not a job")
	var out strings.Builder
	spec.Stdout = &out
	res, err := f.b.Run(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, 1, res.ExitCode, res.Stderr)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	ev, err := domain.ParseEvent([]byte(lines[0]))
	require.NoError(t, err)
	assert.Equal(t, domain.EventReady, ev.Type)
	ev, err = domain.ParseEvent([]byte(lines[1]))
	require.NoError(t, err)
	assert.Equal(t, domain.EventError, ev.Type)
	assert.Contains(t, ev.Error, "invalid job")
	assert.Empty(t, leftovers(spec.InvocationID))
}

func TestHostPathTranslation(t *testing.T) {
	// The host sees its files under /host-view; the engine has them at f.Base.
	f := newFixture(t, nil)
	f.b.cfg.Root, f.b.cfg.HostRoot = "/host-view", f.Base
	spec := f.spec(t)
	spec.GroupDir = strings.Replace(f.Group, f.Base, "/host-view", 1)
	spec.GlobalDir = strings.Replace(f.Global, f.Base, "/host-view", 1)
	spec.SessionDir = strings.Replace(f.Session, f.Base, "/host-view", 1)
	o := f.sh(t, spec, "cat /workspace/group/ORIGINAL")
	require.NoError(t, o.err)
	assert.Equal(t, "mine", o.stdout)

	// A source outside the host's root is refused before any container.
	spec.SessionDir = f.Session
	o = f.sh(t, spec, "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "outside /host-view (CLAWPEN_ROOT)")
}

func TestRemoveOrphans(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cli := f.b.Client()
	inv := "orphan-" + randomHex(t)
	var ids []string
	for i, start := range []bool{false, true} {
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{
				Image: testImage, Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", "sleep 900"},
				Labels: f.b.labels(sandbox.Spec{InvocationID: inv, Group: "team" + strconv.Itoa(i)}),
			},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		require.NoError(t, err)
		ids = append(ids, c.ID)
		if start {
			_, err = cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
			require.NoError(t, err)
		}
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})
	require.Len(t, leftovers(inv), 2)
	n, err := f.b.RemoveOrphans(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, leftovers(inv))
	assert.Empty(t, leftovers(""))
}

// diskUser is a host uid/gid no account holds, standing in for the
// dedicated sandbox user in the idmapped-pin tests.
const diskUser = 4712

// idmappedBackend pins every bind and idmaps it to diskUser, whom it gives
// l's folders.
func idmappedBackend(t *testing.T, l *sandboxtest.Layout) *Backend {
	t.Helper()
	l.SetOwner(t, diskUser, diskUser)
	return testBackend(t, func(c *Config) { c.PinDir, c.DiskUID, c.DiskGID = l.Pins, diskUser, diskUser })
}
