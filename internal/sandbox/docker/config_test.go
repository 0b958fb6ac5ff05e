package docker

import (
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
)

func testProfile(t *testing.T) string {
	t.Helper()
	p, err := sandbox.DockerSeccompProfile()
	require.NoError(t, err)
	return p
}

// A backend not made by New has no profile: no container without one.
func TestCreateConfigNeedsSeccompProfile(t *testing.T) {
	b := &Backend{cfg: Config{Image: "img"}}
	_, _, err := b.createConfig(sandbox.Spec{Group: "team", GroupDir: "/data/groups/team"}, nil)
	require.ErrorContains(t, err, "seccomp")
}

func TestCreateConfigHardening(t *testing.T) {
	b := &Backend{cfg: Config{Image: "img:1", Runtime: "runsc", Root: "/", HostRoot: "/engine"}, seccomp: testProfile(t)}
	spec := sandbox.Spec{
		InvocationID: "inv1", Group: "team",
		GroupDir: "/g", GlobalDir: "/gl", SessionDir: "/s", SocketPath: "/sock",
		Extra: []sandbox.Mount{{HostPath: "/x", Name: "x", ReadOnly: true}, {HostPath: "/y", Name: "y"}},
		Env:   map[string]string{"B": "2", "A": "1", "PATH": "/evil", "HOME": "/root"},
		Limits: sandbox.Limits{
			Timeout: time.Minute, OutputBytes: 1, MemoryBytes: 123 << 20, Pids: 77, CPUs: 1.5, TmpBytes: 1234, ShmBytes: 5678,
		},
	}
	cfg, host, err := b.createConfig(spec, nil)
	require.NoError(t, err)

	assert.Equal(t, "img:1", cfg.Image)
	assert.Equal(t, "1000:1000", cfg.User)
	assert.Equal(t, "clawpen", cfg.Hostname)
	assert.Equal(t, "/workspace/group", cfg.WorkingDir)
	assert.Equal(t, []string{AgentPath}, []string(cfg.Entrypoint))
	assert.Empty(t, cfg.Cmd)
	assert.NotNil(t, cfg.Cmd, "an empty, not nil, Cmd keeps the image's CMD out")
	assert.Equal(t, []string{"A=1", "B=2", "HOME=/home/agent", "USER=agent", "PATH=/usr/local/bin:/usr/bin:/bin"}, cfg.Env)
	assert.Equal(t, map[string]string{LabelGroup: "team", LabelInvocation: "inv1"}, cfg.Labels)
	assert.True(t, cfg.OpenStdin && cfg.StdinOnce && cfg.AttachStdin && cfg.AttachStdout && cfg.AttachStderr)
	assert.False(t, cfg.Tty)
	assert.False(t, cfg.NetworkDisabled, "NetworkDisabled would share the host's network namespace")

	assert.True(t, host.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, host.CapDrop)
	assert.Empty(t, host.CapAdd)
	assert.Equal(t, []string{"no-new-privileges", "seccomp=" + b.seccomp}, host.SecurityOpt)
	assert.EqualValues(t, "none", host.NetworkMode)
	assert.EqualValues(t, "private", host.IpcMode)
	assert.False(t, host.Privileged)
	assert.False(t, host.AutoRemove)
	require.NotNil(t, host.Init)
	assert.True(t, *host.Init)
	assert.Equal(t, "runsc", host.Runtime)
	assert.Equal(t, int64(123<<20), host.Memory)
	assert.Equal(t, int64(123<<20), host.MemorySwap)
	assert.Equal(t, int64(1_500_000_000), host.NanoCPUs)
	assert.Equal(t, int64(5678), host.ShmSize)
	require.NotNil(t, host.PidsLimit)
	assert.Equal(t, int64(77), *host.PidsLimit)
	assert.Equal(t, "json-file", host.LogConfig.Type)
	assert.Equal(t, logMaxSize, host.LogConfig.Config["max-size"])
	assert.Equal(t, map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777,size=1234"}, host.Tmpfs)
	assert.Empty(t, host.Binds, "binds go through Mounts, with explicit propagation")

	type m struct {
		src, dst string
		ro       bool
	}
	var got []m
	for _, mt := range host.Mounts {
		assert.Equal(t, mount.TypeBind, mt.Type)
		require.NotNil(t, mt.BindOptions)
		assert.Equal(t, mount.PropagationPrivate, mt.BindOptions.Propagation)
		assert.NotContains(t, mt.Source, "docker.sock")
		got = append(got, m{mt.Source, mt.Target, mt.ReadOnly})
	}
	assert.Equal(t, []m{
		{"/engine/g", "/workspace/group", false},
		{"/engine/gl", "/workspace/global", true},
		{"/engine/s", "/home/agent", false},
		{"/engine/sock", "/run/clawpen/host.sock", false},
		{"/engine/x", "/workspace/extra/x", true},
		{"/engine/y", "/workspace/extra/y", false},
	}, got)

	spec.GlobalWritable = true
	_, host, err = b.createConfig(spec, []string{"/bin/sh", "-c", "true"})
	require.NoError(t, err)
	assert.False(t, host.Mounts[1].ReadOnly)
}

// A host in a container hands the engine only what lies under its root, as
// the Docker host's path; anything else would bind whatever the Docker host
// has at that path, so the run is refused.
func TestCreateConfigTranslatesOrRefusesBindSources(t *testing.T) {
	b := &Backend{cfg: Config{Image: "img", Root: "/app", HostRoot: "/srv/clawpen"}, seccomp: testProfile(t)}
	spec := sandbox.Spec{Group: "team", GroupDir: "/app/groups/team", SessionDir: "/app/data/sessions/team",
		Extra: []sandbox.Mount{{HostPath: "/app/projects/shared", Name: "shared", ReadOnly: true}}}
	_, host, err := b.createConfig(spec, nil)
	require.NoError(t, err)
	var sources []string
	for _, m := range host.Mounts {
		sources = append(sources, m.Source)
	}
	assert.Equal(t, []string{"/srv/clawpen/groups/team", "/srv/clawpen/data/sessions/team", "/srv/clawpen/projects/shared"}, sources)

	for _, outside := range []string{"/srv/outside", "/app2/x", "/app/../etc", "/"} {
		spec := spec
		spec.Extra = []sandbox.Mount{{HostPath: outside, Name: "out", ReadOnly: true}}
		cfg, host, err := b.createConfig(spec, nil)
		require.Error(t, err, outside)
		assert.Contains(t, err.Error(), "cannot bind "+outside+": it is outside /app (CLAWPEN_ROOT)")
		assert.Nil(t, cfg)
		assert.Nil(t, host)
	}
}

func TestCreateConfigCommandAndDefaults(t *testing.T) {
	b := &Backend{cfg: Config{Image: "img", Command: []string{"/bin/true", "x"}}, seccomp: testProfile(t)}
	cfg, host, err := b.createConfig(sandbox.Spec{GroupDir: "/g"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"/bin/true"}, []string(cfg.Entrypoint))
	assert.Equal(t, []string{"x"}, []string(cfg.Cmd))
	assert.Equal(t, sandbox.DefaultLimits.MemoryBytes, host.Memory)
	assert.Equal(t, int64(sandbox.DefaultLimits.Pids), *host.PidsLimit)
	assert.Equal(t, int64(1_000_000_000), host.NanoCPUs, "one CPU by default")
	assert.Equal(t, sandbox.DefaultLimits.ShmBytes, host.ShmSize)
	assert.Equal(t, host.Memory, host.MemorySwap, "no swap on top")
	assert.Len(t, host.Mounts, 1)
	assert.Contains(t, host.Tmpfs, "/home/agent", "no session dir: a private tmpfs home")
	assert.Contains(t, host.Tmpfs["/home/agent"], "uid=1000,gid=1000")

	cfg, _, err = b.createConfig(sandbox.Spec{GroupDir: "/g"}, []string{"/bin/sh", "-c", "echo"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/bin/sh"}, []string(cfg.Entrypoint))
	assert.Equal(t, []string{"-c", "echo"}, []string(cfg.Cmd))
}

func TestContainerName(t *testing.T) {
	assert.Equal(t, "clawpen-abc123", containerName("abc123"))
	assert.Equal(t, "", containerName(""))
	assert.Equal(t, "", containerName("a/b"))
	assert.Equal(t, "", containerName("-x"))
}
