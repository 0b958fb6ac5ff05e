package docker

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func TestCheck(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, f.b.Check(context.Background()))
	assert.Equal(t, "docker", f.b.Name())
}

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

// TestView checks each property of the sandbox contract from inside.
func TestView(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name     string
		script   string
		wantExit int // -1: any non-zero
		wantOut  string
	}{
		{name: "ids", script: "id -u; id -g; id -un", wantOut: "1000\n1000\nagent\n"},
		{name: "hostname", script: "hostname", wantOut: "clawpen\n"},
		{name: "cwd", script: "pwd", wantOut: "/workspace/group\n"},
		{name: "group readable", script: "cat /workspace/group/ORIGINAL", wantOut: "mine"},
		{name: "global readable", script: "cat /workspace/global/MEMORY.md", wantOut: "global"},
		{name: "global read-only", script: "touch /workspace/global/x", wantExit: -1},
		{name: "root read-only", script: "mkdir /newdir", wantExit: -1},
		{name: "usr read-only", script: "touch /usr/x", wantExit: -1},
		{name: "etc read-only", script: "echo x >> /etc/passwd", wantExit: -1},
		{name: "tmp writable", script: "echo a > /tmp/a && cat /tmp/a && stat -c %a /tmp", wantOut: "a\n1777\n"},
		{name: "tmp size capped", script: "head -c 2097152 /dev/zero > /tmp/big", wantExit: -1},
		{name: "tmp nosuid nodev", script: "grep ' /tmp ' /proc/mounts | grep -c 'nosuid,nodev'", wantOut: "1\n"},
		{name: "no capabilities", script: "grep -E '^(CapInh|CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '",
			wantOut: "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\n"},
		{name: "only loopback", script: "ls /sys/class/net", wantOut: "lo\n"},
		{name: "no default route", script: "tail -n +2 /proc/net/route | wc -l", wantOut: "0\n"},
		{name: "no docker socket", script: "ls /var/run/docker.sock /run/docker.sock", wantExit: -1},
		{name: "init is pid 1", script: "cat /proc/1/comm", wantOut: "docker-init\n"},
		{name: "host socket dir", script: "test -d /run/clawpen && echo ok", wantOut: "ok\n"},
		{name: "stdin closed", script: "cat; echo eof", wantOut: "eof\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := f.sh(t, f.spec(t), tc.script)
			require.NoError(t, o.err)
			if tc.wantExit == -1 {
				assert.NotEqual(t, 0, o.res.ExitCode, "stdout: %s", o.stdout)
			} else {
				assert.Equal(t, tc.wantExit, o.res.ExitCode, "stderr: %s", o.res.Stderr)
			}
			if tc.wantOut != "" {
				assert.Equal(t, tc.wantOut, o.stdout)
			}
			assert.False(t, o.res.TimedOut)
			assert.False(t, o.res.OutputTruncated)
		})
	}
}

func TestWritesLandOnHostAsSandboxUser(t *testing.T) {
	f := newFixture(t, nil)
	o := f.sh(t, f.spec(t), "echo hi > /workspace/group/new.txt && echo s > /home/agent/state && mkdir /workspace/group/d")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	for _, p := range []string{filepath.Join(f.group, "new.txt"), filepath.Join(f.session, "state"), filepath.Join(f.group, "d")} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, uint32(sandbox.UID), st.Uid, p)
		assert.Equal(t, uint32(sandbox.GID), st.Gid, p)
	}
	_, err := os.Stat(filepath.Join(f.global, "x"))
	assert.True(t, os.IsNotExist(err))
}

func TestGlobalWritableForMain(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.IsMain, spec.GlobalWritable = true, true
	o := f.sh(t, spec, "echo note >> /workspace/global/MEMORY.md")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	b, err := os.ReadFile(filepath.Join(f.global, "MEMORY.md"))
	require.NoError(t, err)
	assert.Equal(t, "globalnote\n", string(b))
}

func TestNoSessionDirGetsPrivateHome(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.SessionDir = ""
	o := f.sh(t, spec, "echo x > /home/agent/f && stat -c '%u %a' /home/agent")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.Equal(t, "1000 700\n", o.stdout)
}

func TestExtraMounts(t *testing.T) {
	f := newFixture(t, nil)
	ro := filepath.Join(f.base, "projects", "ro")
	rw := filepath.Join(f.base, "projects", "rw")
	for _, d := range []string{ro, rw} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "README"), []byte(filepath.Base(d)), 0o644))
		if os.Getuid() == 0 {
			require.NoError(t, os.Chown(d, sandbox.UID, sandbox.GID))
		}
	}
	spec := f.spec(t)
	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "docs", ReadOnly: true}, {HostPath: rw, Name: "code"}}
	o := f.sh(t, spec, "cat /workspace/extra/docs/README /workspace/extra/code/README; touch /workspace/extra/code/new; touch /workspace/extra/docs/new")
	require.NoError(t, o.err)
	assert.Equal(t, "rorw", o.stdout)
	assert.Equal(t, 1, o.res.ExitCode, "only the read-only touch fails")
	assert.FileExists(t, filepath.Join(rw, "new"))
	assert.NoFileExists(t, filepath.Join(ro, "new"))

	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "../escape"}}
	o = f.sh(t, spec, "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "invalid extra mount name")
}

func TestEnvironmentIsAllowlistOnly(t *testing.T) {
	t.Setenv("CLAWPEN_TEST_SECRET", "leak")
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Env["HOME"] = "/root" // fixed variables cannot be overridden
	spec.Env["PATH"] = "/evil"
	o := f.cmd(t, spec, "/usr/bin/env")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	sort.Strings(lines)
	assert.Equal(t, []string{
		"CLAWPEN_ASSISTANT_NAME=Andy",
		"HOME=/home/agent",
		"HOSTNAME=clawpen", // the engine always sets it
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC",
		"USER=agent",
	}, lines)

	spec.Env = map[string]string{"BAD=NAME": "x"}
	o = f.cmd(t, spec, "/usr/bin/env")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "invalid environment variable name")
}

func TestPlantedSecretsUnreachable(t *testing.T) {
	f := newFixture(t, nil)
	// Search every file name the sandbox can see; /proc, /sys and /dev are not data.
	o := f.sh(t, f.spec(t), `find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name id_rsa -o -name OTHER_GROUP_SECRET -o -name 'clawpen-docker-test-*' -o -name docker.sock \) -print 2>/dev/null;
grep -rl 'FAKE PRIVATE KEY' /workspace /home /tmp /etc /run 2>/dev/null; ls /work /data `+f.base+` 2>&1 | wc -l`)
	require.NoError(t, o.err)
	assert.Equal(t, "3\n", o.stdout, "no secret found; three ls errors (stderr: %s)", o.res.Stderr)
}

func TestHostSocketIsBound(t *testing.T) {
	f := newFixture(t, nil)
	uid, gid := -1, -1
	if os.Getuid() == 0 {
		uid, gid = sandbox.UID, sandbox.GID
	}
	srv, err := hostsock.Listen(f.sock, uid, gid, domain.Caller{Group: "team", Run: "test"}, hostsock.Config{
		IPC: func(_ context.Context, id domain.Caller, op string, body []byte) (int, any) {
			return http.StatusOK, map[string]string{"group": id.Group, "op": op, "body": string(body)}
		},
	})
	require.NoError(t, err)
	defer srv.Close()

	spec := f.spec(t)
	spec.SocketPath = f.sock
	script := `test -S /run/clawpen/host.sock || exit 3
if command -v curl >/dev/null; then curl -s --unix-socket /run/clawpen/host.sock -d '{"group":"main"}' http://clawpen/ipc/ping
else printf 'POST /ipc/ping HTTP/1.0\r\nHost: clawpen\r\nContent-Length: 16\r\n\r\n{"group":"main"}' | nc local:/run/clawpen/host.sock | tail -n 1; fi`
	if !realImage {
		// busybox nc has no unix sockets; socat-like "local:" is not there either.
		script = `test -S /run/clawpen/host.sock && test -w /run/clawpen/host.sock && echo bound`
	}
	o := f.sh(t, spec, script)
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	if realImage {
		assert.Equal(t, `{"body":"{\"group\":\"main\"}","group":"team","op":"ping"}`+"\n", o.stdout)
	} else {
		assert.Equal(t, "bound\n", o.stdout)
	}
}

// TestNoNetwork tries to reach a listener on the host's own addresses.
func TestNoNetwork(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	defer ln.Close()
	// Accept and count: a connection that only waits in the backlog would be
	// missed by an Accept after the fact.
	accepted := make(chan int)
	go func() {
		n := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				accepted <- n
				return
			}
			n++
			_ = c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	var targets []string
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			targets = append(targets, ipn.IP.String())
		}
	}
	require.NotEmpty(t, targets)
	script := "fail=0; for ip in " + strings.Join(targets, " ") + "; do " +
		"if command -v bash >/dev/null; then timeout 3 bash -c \"echo hi > /dev/tcp/$ip/" + port + "\" && fail=1; " +
		"else echo hi | timeout 3 nc $ip " + port + " && fail=1; fi; done; exit $fail"
	o := f.sh(t, f.spec(t), script)
	require.NoError(t, o.err)
	assert.Equal(t, 0, o.res.ExitCode, "a connection succeeded: %s", o.res.Stderr)
	// Nothing reached the host's listener.
	require.NoError(t, ln.Close())
	assert.Equal(t, 0, <-accepted, "connections from the sandbox reached the host")
}

func TestStdinReachesCommand(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Stdin = []byte(`{"prompt":"hi \u0010\u0011"}` + strings.Repeat("x", 256<<10))
	o := f.cmd(t, spec, "/bin/cat")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.Equal(t, string(spec.Stdin), o.stdout)
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

func TestTimeoutKillsAndRemoves(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.Timeout = 2 * time.Second
	o := f.sh(t, spec, "sleep 900 & echo started; sleep 900")
	require.NoError(t, o.err)
	assert.True(t, o.res.TimedOut)
	assert.Equal(t, "started\n", o.stdout)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.res.ExitCode)
}

func TestContextCancelKills(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	spec := f.spec(t)
	out := &lineSignal{ch: make(chan struct{})}
	spec.Stdout = out
	go func() {
		<-out.ch
		cancel()
	}()
	res, err := f.b.run(ctx, spec, []string{"/bin/sh", "-c", "echo up; sleep 900"})
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 128+int(syscall.SIGKILL), res.ExitCode)
	assert.Empty(t, leftovers(spec.InvocationID))
}

// lineSignal closes ch on the first write.
type lineSignal struct {
	ch   chan struct{}
	done bool
}

func (l *lineSignal) Write(p []byte) (int, error) {
	if !l.done {
		l.done = true
		close(l.ch)
	}
	return len(p), nil
}

func TestOutputCapKills(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.OutputBytes = 4096
	var out strings.Builder
	spec.Stdout = &out
	o := f.cmd(t, spec, "/bin/sh", "-c", "yes clawpen")
	require.NoError(t, o.err)
	assert.True(t, o.res.OutputTruncated)
	assert.False(t, o.res.TimedOut)
	assert.Equal(t, 4096, out.Len())
	assert.True(t, strings.HasPrefix(out.String(), "clawpen\nclawpen\n"))
	assert.NotEqual(t, 0, o.res.ExitCode)
}

func TestStderrTail(t *testing.T) {
	f := newFixture(t, nil)
	o := f.sh(t, f.spec(t), "head -c 20000 /dev/zero | tr '\\0' a >&2; echo END >&2; echo out; exit 3")
	require.NoError(t, o.err)
	assert.Equal(t, 3, o.res.ExitCode)
	assert.Equal(t, "out\n", o.stdout)
	assert.Len(t, o.res.Stderr, stderrTail)
	assert.True(t, strings.HasSuffix(o.res.Stderr, "aaaEND\n"))
}

func TestProcessLimit(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.Pids = 16
	// Each line is one background process that was created.
	o := f.sh(t, spec, "i=0; while [ $i -lt 100 ]; do sleep 900 & echo $i; i=$((i+1)); done")
	require.NoError(t, o.err)
	assert.False(t, o.res.TimedOut)
	assert.NotEqual(t, 0, o.res.ExitCode)
	assert.Contains(t, strings.ToLower(o.res.Stderr), "fork")
	started := strings.Count(o.stdout, "\n")
	assert.Less(t, started, 16)
	assert.Greater(t, started, 0)
}

// The host learns that the container reached its process limit: the
// engine does not say, so the host watches the container's cgroup while it
// runs. Nothing runs before the job is given, as for the agent; the shell
// outlives the refused fork by a second, forking nothing more.
func TestProcessLimitReached(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.Pids = 16
	spec.Stdin = []byte("go\n")
	o := f.sh(t, spec, "read -r go; mkfifo /tmp/f; exec 3<>/tmp/f; (while :; do sleep 900 & done) 2>/dev/null; echo FORK-REFUSED; read -t 1 x <&3; echo done")
	require.NoError(t, o.err)
	assert.Contains(t, o.stdout, "FORK-REFUSED")
	assert.Equal(t, sandbox.ProcessLimit, o.res.Limit)
}

func TestForkBombContained(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.Pids = 32
	spec.Limits.Timeout = 5 * time.Second
	o := f.sh(t, spec, "bomb() { bomb | bomb & }; bomb; sleep 900")
	require.NoError(t, o.err)
	// Either the wall clock ended it or the shell could not fork its sleep.
	assert.True(t, o.res.TimedOut || o.res.ExitCode != 0, "exit %d", o.res.ExitCode)
	// The host is fine: a fresh sandbox runs normally.
	o = f.sh(t, f.spec(t), "echo alive")
	require.NoError(t, o.err)
	assert.Equal(t, "alive\n", o.stdout)
}

func TestMemoryLimit(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.Limits.MemoryBytes = 64 << 20
	// Command substitution keeps the whole 300 MB in the shell's memory.
	o := f.sh(t, spec, "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived ${#x}")
	require.NoError(t, o.err)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.res.ExitCode)
	assert.Equal(t, sandbox.MemoryLimit, o.res.Limit, "the engine's OOMKilled")
	assert.Empty(t, o.stdout)
	assert.False(t, o.res.TimedOut)

	o = f.sh(t, spec, "head -c 50000000 /dev/zero | wc -c")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Limit, "a run within its limits reached none")
}

func TestSetupFailureIsError(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec(t)
	spec.GroupDir = filepath.Join(f.base, "does-not-exist")
	o := f.sh(t, spec, "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "does-not-exist")
}

func TestHostPathTranslation(t *testing.T) {
	// The host sees its files under /host-view; the engine has them at f.base.
	f := newFixture(t, nil)
	f.b.cfg.Root, f.b.cfg.HostRoot = "/host-view", f.base
	spec := f.spec(t)
	spec.GroupDir = strings.Replace(f.group, f.base, "/host-view", 1)
	spec.GlobalDir = strings.Replace(f.global, f.base, "/host-view", 1)
	spec.SessionDir = strings.Replace(f.session, f.base, "/host-view", 1)
	o := f.sh(t, spec, "cat /workspace/group/ORIGINAL")
	require.NoError(t, o.err)
	assert.Equal(t, "mine", o.stdout)

	// A source outside the host's root is refused before any container.
	spec.SessionDir = f.session
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

func TestExtraMountMasksAndWritePaths(t *testing.T) {
	f := newFixture(t, nil)
	proj := filepath.Join(f.base, "projects", "app")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "out"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(proj, ".ssh"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".env"), []byte("MASKED-SECRET"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".ssh", "id_rsa"), []byte("MASKED-KEY"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "main.go"), []byte("package main"), 0o644))
	if os.Getuid() == 0 {
		require.NoError(t, os.Chown(filepath.Join(proj, "out"), sandbox.UID, sandbox.GID))
	}
	spec := f.spec(t)
	spec.Extra = []sandbox.Mount{{HostPath: proj, Name: "app", ReadOnly: true,
		Writable: []string{filepath.Join(proj, "out")},
		Masks:    []string{filepath.Join(proj, ".env"), filepath.Join(proj, ".ssh")}}}
	o := f.sh(t, spec, `cd /workspace/extra/app; cat main.go; echo; echo "env=[$(cat .env)]"; echo "ssh=[$(ls -A .ssh)]";
		echo built > out/bin && echo OUT-WRITTEN; touch main2.go 2>/dev/null && echo RO-BROKEN || echo RO-HELD;
		echo x > .env 2>/dev/null && echo MASK-WRITTEN || echo MASK-HELD`)
	require.NoError(t, o.err)
	// A write to a masked file goes to /dev/null: accepted, and lost.
	for _, want := range []string{"package main", "env=[]", "ssh=[]", "OUT-WRITTEN", "RO-HELD"} {
		assert.Contains(t, o.stdout, want)
	}
	assert.NotContains(t, o.stdout, "MASKED-")
	assert.FileExists(t, filepath.Join(proj, "out", "bin"))
	data, err := os.ReadFile(filepath.Join(proj, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "MASKED-SECRET", string(data), "the host file is untouched")
}

// A mounted path swapped for a symlink to / after validation still binds the
// validated directory: it was pinned through a descriptor opened without
// following symlinks.
func TestPinnedMountSurvivesSymlinkSwap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning extra mounts needs root")
	}
	f := newFixture(t, nil)
	f.b.cfg.PinDir = filepath.Join(f.base, "pins")
	proj := filepath.Join(f.base, "projects", "app")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "ORIGINAL-MARK"), []byte("x"), 0o644))
	f.b.afterPin = func() {
		require.NoError(t, os.Rename(proj, proj+".moved"))
		require.NoError(t, os.Symlink("/", proj))
	}
	defer func() { f.b.afterPin = nil }()
	spec := f.spec(t)
	spec.Extra = []sandbox.Mount{{HostPath: proj, Name: "app", ReadOnly: true}}
	o := f.sh(t, spec, "ls /workspace/extra/app")
	require.NoError(t, o.err)
	assert.Contains(t, o.stdout, "ORIGINAL-MARK")
	assert.NotContains(t, o.stdout, "etc", "the host's / must not appear")
	entries, err := os.ReadDir(f.b.cfg.PinDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "staging binds are released")
}

// diskUser is a host uid/gid no account holds, standing in for the
// dedicated sandbox user in the idmapped-pin tests.
const diskUser = 4712

// idmappedFixture is a root host's setup: every bind pinned and idmapped to
// diskUser, the sandbox's folders owned by it as the runner arranges.
func idmappedFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("idmapped pins need root")
	}
	var pinDir string
	f := newFixture(t, func(c *Config) {
		pinDir = filepath.Join(os.TempDir(), "clawpen-docker-pins-"+randomHex(t))
		c.PinDir, c.DiskUID, c.DiskGID = pinDir, diskUser, diskUser
	})
	t.Cleanup(func() { _ = os.RemoveAll(pinDir) })
	for _, d := range []string{f.group, f.global, f.session} {
		require.NoError(t, filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, diskUser, diskUser)
		}))
	}
	return f
}

// TestIDMappedWritesLandAsDiskUser: inside, the sandbox is uid 1000 and
// owns its folders; on disk, what it wrote belongs to the disk user, never
// to whoever holds uid 1000 on the host.
func TestIDMappedWritesLandAsDiskUser(t *testing.T) {
	f := idmappedFixture(t)
	o := f.sh(t, f.spec(t), "id -u; stat -c '%u %g' /workspace/group /home/agent; echo hi > /workspace/group/new.txt && echo s > /home/agent/state && mkdir /workspace/group/d && echo WROTE")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.Equal(t, "1000\n1000 1000\n1000 1000\nWROTE\n", o.stdout)
	for _, p := range []string{filepath.Join(f.group, "new.txt"), filepath.Join(f.session, "state"), filepath.Join(f.group, "d")} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{diskUser, diskUser}, [2]uint32{st.Uid, st.Gid}, p)
	}
	entries, err := os.ReadDir(f.b.cfg.PinDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "staging binds are released")
}

// TestPinnedBindsAreNosuidNodev reads the container's own mount table:
// every bind of a host tree is nosuid,nodev, read-only ones included, and
// read-only ones stay read-only.
func TestPinnedBindsAreNosuidNodev(t *testing.T) {
	f := idmappedFixture(t)
	ro := filepath.Join(f.base, "projects", "ro")
	rw := filepath.Join(f.base, "projects", "rw")
	for _, d := range []string{ro, rw} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.Chown(d, diskUser, diskUser))
	}
	spec := f.spec(t)
	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "docs", ReadOnly: true}, {HostPath: rw, Name: "code"}}
	o := f.sh(t, spec, `for m in /workspace/group /workspace/global /home/agent /workspace/extra/docs /workspace/extra/code; do
  echo "$m $(awk -v m=$m '$5 == m {print $6}' /proc/self/mountinfo)"; done
touch /workspace/global/x 2>/dev/null && echo GLOBAL-WRITABLE; touch /workspace/extra/docs/x 2>/dev/null && echo DOCS-WRITABLE; true`)
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	require.Len(t, lines, 5, o.stdout)
	for _, l := range lines {
		opts := strings.Split(strings.Fields(l + " -")[1], ",")
		assert.Subset(t, opts, []string{"nosuid", "nodev"}, l)
	}
	assert.Contains(t, lines[1], "ro,", "global is read-only for a non-main group")
	assert.Contains(t, lines[3], "ro,")
	assert.Contains(t, lines[4], "rw,")
	assert.NotContains(t, o.stdout, "WRITABLE")
}

// TestGlobalNobodysToNonMain: groups/global belongs to the sandbox user,
// which every container writes as; a non-main group sees it as nobody's
// (and read-only), main as its own.
func TestGlobalNobodysToNonMain(t *testing.T) {
	f := idmappedFixture(t)
	o := f.sh(t, f.spec(t), "stat -c '%u' /workspace/global /workspace/global/MEMORY.md /workspace/group")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.Equal(t, "65534\n65534\n1000\n", o.stdout)

	spec := f.spec(t)
	spec.IsMain, spec.GlobalWritable = true, true
	o = f.sh(t, spec, "stat -c '%u' /workspace/global/MEMORY.md; echo x >> /workspace/global/MEMORY.md && echo WROTE")
	require.NoError(t, o.err)
	assert.Equal(t, "1000\nWROTE\n", o.stdout, "main owns and writes global")
}

// The per-process limits bwrap sets are the container's too: file size, open
// descriptors, and no core dumps (which would go to the host's core_pattern).
func TestProcessLimitsAsBwrap(t *testing.T) {
	f := newFixture(t, nil)
	o := f.sh(t, f.spec(t), "cat /proc/self/limits")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	want := map[string]string{ // soft and hard
		"Max open files":     "1024 1024",
		"Max core file size": "0 0",
		"Max file size":      "1073741824 1073741824",
	}
	for _, line := range strings.Split(o.stdout, "\n") {
		for name, limits := range want {
			if strings.HasPrefix(line, name+" ") {
				f := strings.Fields(strings.TrimPrefix(line, name))
				require.GreaterOrEqual(t, len(f), 2, line)
				assert.Equal(t, limits, f[0]+" "+f[1], name)
				delete(want, name)
			}
		}
	}
	assert.Empty(t, want, "limits missing from /proc/self/limits:\n%s", o.stdout)
}
