package bwrap

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func TestCheck(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, f.b.Check(context.Background()))
}

func TestNewRejects(t *testing.T) {
	requireBwrap(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing bwrap", Config{BwrapPath: "/nonexistent/bwrap", RunAsUID: 1000, RunAsGID: 1000, AgentBin: "/bin/true"}, "bubblewrap not found"},
		{"missing agent", func() Config {
			u, g := runAs()
			return Config{RunAsUID: u, RunAsGID: g, AgentBin: "/nonexistent/clawpen-agent"}
		}(), "agent binary"},
		{"no agent", func() Config { u, g := runAs(); return Config{RunAsUID: u, RunAsGID: g} }(), "no agent binary"},
	}
	if os.Getuid() == 0 {
		tests = append(tests,
			struct {
				name string
				cfg  Config
				want string
			}{"root maps to root", Config{RunAsUID: -1, RunAsGID: -1, AgentBin: "/bin/true"}, "unprivileged user"},
			struct {
				name string
				cfg  Config
				want string
			}{"uid zero", Config{RunAsUID: 0, RunAsGID: 1000, AgentBin: "/bin/true"}, "unprivileged user"},
		)
	} else {
		tests = append(tests, struct {
			name string
			cfg  Config
			want string
		}{"other user", Config{RunAsUID: os.Getuid() + 1, RunAsGID: -1, AgentBin: "/bin/true"}, "can only use its own"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestView checks each property of the sandbox contract from inside.
func TestView(t *testing.T) {
	f := newFixture(t, nil)

	tests := []struct {
		name     string
		script   string
		wantExit int
		wantOut  string // exact stdout when set
		contains string
	}{
		{name: "ids", script: "id -u; id -g; id -un", wantOut: "1000\n1000\nagent\n"},
		{name: "hostname", script: "hostname", wantOut: "clawpen\n"},
		{name: "cwd", script: "pwd", wantOut: "/workspace/group\n"},
		{name: "group readable", script: "cat /workspace/group/ORIGINAL", wantOut: "mine"},
		{name: "global readable", script: "cat /workspace/global/MEMORY.md", wantOut: "global"},
		{name: "global read-only", script: "touch /workspace/global/x", wantExit: 1, contains: ""},
		{name: "usr read-only", script: "touch /usr/x", wantExit: 1},
		{name: "root read-only", script: "mkdir /newdir", wantExit: 1},
		{name: "etc read-only", script: "echo x >> /etc/passwd", wantExit: 2},
		{name: "tmp writable", script: "echo a > /tmp/a && cat /tmp/a && stat -c %a /tmp", wantOut: "a\n1777\n"},
		{name: "tmp size capped", script: "head -c 2097152 /dev/zero > /tmp/big", wantExit: 1},
		{name: "no capabilities", script: "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '",
			wantOut: "CapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1\n"},
		{name: "only loopback", script: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", wantOut: "lo\n"},
		{name: "no sysfs", script: "test -e /sys/class/net", wantExit: 1},
		{name: "no nested user namespaces", script: "unshare -U true", wantExit: 1},
		{name: "synthesised etc", script: "ls /etc; cat /etc/passwd",
			wantOut: etcListing(sandbox.ProbeHostSystem()) + sandbox.EtcFiles[0].Content},
		{name: "no inherited descriptors", script: "ls /proc/self/fd", wantOut: "0\n1\n2\n3\n"},
		{name: "host dirs absent", script: "ls -A /; ls -A /home /run /run/clawpen /workspace",
			wantOut: "bin\ndev\netc\nhome\nlib\nlib64\nproc\nrun\nsbin\ntmp\nusr\nworkspace\n" +
				"/home:\nagent\n\n/run:\nclawpen\n\n/run/clawpen:\n\n/workspace:\nglobal\ngroup\n"},
		{name: "own pid namespace", script: "echo $$; cat /proc/1/comm", wantOut: "2\nbwrap\n"},
		// The namespace's init too: it could otherwise be made to do what
		// the command may not.
		{name: "seccomp filter", script: "grep -h ^Seccomp: /proc/self/status /proc/1/status | tr -s '\t ' ' '", wantOut: "Seccomp: 2\nSeccomp: 2\n"},
		{name: "proc keys hidden", script: "cat /proc/keys 2>/dev/null | wc -c", wantOut: "0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := f.sh(t, f.spec(), tc.script)
			require.NoError(t, o.err)
			assert.Equal(t, tc.wantExit, o.res.ExitCode, "stderr: %s", o.res.Stderr)
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
	o := f.sh(t, f.spec(), "echo hi > /workspace/group/new.txt && echo s > /home/agent/state && mkdir /workspace/group/d")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	for _, p := range []string{filepath.Join(f.group, "new.txt"), filepath.Join(f.session, "state"), filepath.Join(f.group, "d")} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, uint32(f.uid), fi.Sys().(*syscall.Stat_t).Uid, p)
	}
	_, err := os.Stat(filepath.Join(f.global, "x"))
	assert.True(t, os.IsNotExist(err))
}

func TestGlobalWritableForMain(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec()
	spec.GlobalWritable = true
	o := f.sh(t, spec, "echo note >> /workspace/global/MEMORY.md")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	b, err := os.ReadFile(filepath.Join(f.global, "MEMORY.md"))
	require.NoError(t, err)
	assert.Equal(t, "globalnote\n", string(b))
}

func TestExtraMounts(t *testing.T) {
	f := newFixture(t, nil)
	ro := filepath.Join(f.base, "projects", "ro")
	rw := filepath.Join(f.base, "projects", "rw")
	for _, d := range []string{ro, rw} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "README"), []byte(filepath.Base(d)), 0o644))
		if f.uid != os.Getuid() {
			require.NoError(t, os.Chown(d, f.uid, f.uid))
		}
	}
	spec := f.spec()
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
	spec := f.spec()
	spec.Env["HOME"] = "/root" // fixed variables cannot be overridden
	o := f.cmd(t, spec, "/usr/bin/env")
	require.NoError(t, o.err)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	sort.Strings(lines)
	assert.Equal(t, []string{
		"CLAWPEN_ASSISTANT_NAME=Andy",
		"HOME=/home/agent",
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"PWD=/workspace/group", // bwrap sets it for --chdir
		"TZ=UTC",
		"USER=agent",
	}, lines)

	spec.Env = map[string]string{"BAD=NAME": "x"}
	o = f.cmd(t, spec, "/usr/bin/env")
	require.Error(t, o.err)
}

func TestInheritedDescriptorsDoNotLeak(t *testing.T) {
	f := newFixture(t, nil)
	secret, err := os.Open(filepath.Join(f.home, ".ssh", "id_rsa"))
	require.NoError(t, err)
	defer secret.Close()
	// syscall.Dup makes a descriptor without close-on-exec, like one inherited
	// from the host's parent process.
	fd, err := syscall.Dup(int(secret.Fd()))
	require.NoError(t, err)
	defer syscall.Close(fd)
	o := f.sh(t, f.spec(), "ls /proc/self/fd; cat <&"+strconv.Itoa(fd))
	require.NoError(t, o.err)
	assert.Equal(t, "0\n1\n2\n3\n", o.stdout)
	assert.NotEqual(t, 0, o.res.ExitCode)
}

func TestPlantedSecretsUnreachable(t *testing.T) {
	f := newFixture(t, nil)
	// Search every file name the sandbox can see; /proc, /sys and /dev are not data.
	o := f.sh(t, f.spec(), `find / \( -path /proc -o -path /dev \) -prune -o \( -name id_rsa -o -name OTHER_GROUP_SECRET -o -name 'clawpen-bwrap-test-*' \) -print 2>/dev/null;
grep -rl 'FAKE PRIVATE KEY' /workspace /home /tmp /etc /run 2>/dev/null; ls /root /var /work /data 2>&1 | wc -l`)
	require.NoError(t, o.err)
	assert.Equal(t, "4\n", o.stdout, "no secret found; four ls errors (stderr: %s)", o.res.Stderr)
}

func TestHostSocketIsBound(t *testing.T) {
	f := newFixture(t, nil)
	uid, gid := runAs()
	// The real host socket: 0600, owned by the sandbox user.
	srv, err := hostsock.Listen(f.sock, uid, gid, domain.Caller{Group: "team", Run: "test"}, hostsock.Config{
		IPC: func(_ context.Context, id domain.Caller, op string, body []byte) (int, any) {
			return http.StatusOK, map[string]string{"group": id.Group, "op": op, "body": string(body)}
		},
	})
	require.NoError(t, err)
	defer srv.Close()

	spec := f.spec()
	spec.SocketPath = f.sock
	script := "test -S /run/clawpen/host.sock"
	want := ""
	if _, err := exec.LookPath("curl"); err == nil {
		script += ` && curl -s --unix-socket /run/clawpen/host.sock -d '{"group":"main"}' http://clawpen/ipc/ping`
		want = `{"body":"{\"group\":\"main\"}","group":"team","op":"ping"}` + "\n"
	}
	o := f.sh(t, spec, script)
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.Equal(t, want, o.stdout)
}

func TestNoNetwork(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	o := f.cmd(t, f.spec(), "/bin/bash", "-c", "echo hello > /dev/tcp/127.0.0.1/"+strconv.Itoa(port))
	require.NoError(t, o.err)
	assert.NotEqual(t, 0, o.res.ExitCode)
	assert.Contains(t, o.res.Stderr, "Connection refused")
	// Nothing reached the host's listener (a connect that succeeded would
	// have been accepted before the sandbox exited).
	assert.Zero(t, accepted.Load())
}

func TestAgentBinaryRunsWithStdin(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "clawpen-agent-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	agent := filepath.Join(dir, "clawpen-agent")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nprintf 'agent %s got ' \"$0\"\ncat\n"), 0o755))

	f := newFixture(t, func(c *Config) { c.Command = nil; c.AgentBin = agent })
	spec := f.spec()
	spec.Stdin = []byte(`{"prompt":"hi"}`)
	var out strings.Builder
	spec.Stdout = &out
	res, err := f.b.Run(context.Background(), spec)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, `agent /opt/clawpen/bin/clawpen-agent got {"prompt":"hi"}`, out.String())

	o := f.sh(t, f.spec(), "echo x > /opt/clawpen/bin/clawpen-agent")
	require.NoError(t, o.err)
	assert.NotEqual(t, 0, o.res.ExitCode, "agent binary is read-only")
}

func TestSymlinkSwapAfterOpen(t *testing.T) {
	f := newFixture(t, nil)
	moved := f.group + ".moved"
	f.b.afterOpen = func() {
		// An attacker replaces the validated folder with a link to the other
		// group's folder: the sandbox must still get the original inode.
		require.NoError(t, os.Rename(f.group, moved))
		require.NoError(t, os.Symlink(f.other, f.group))
	}
	o := f.sh(t, f.spec(), "ls /workspace/group")
	require.NoError(t, o.err)
	assert.Equal(t, "ORIGINAL\n", o.stdout)

	// The next run refuses the symlink outright.
	f.b.afterOpen = nil
	o = f.sh(t, f.spec(), "ls /workspace/group")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "symlinks are not followed")
}

// TestSymlinkAboveSourceRefused: a bind source whose parent was swapped for
// a symlink since it was resolved, to another group's folder or to /etc, is
// refused, not bound (pinned on a root host, opened otherwise).
func TestSymlinkAboveSourceRefused(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, os.Symlink(filepath.Dir(f.other), filepath.Join(f.base, "swapped")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(f.base, "etc")))
	for _, dir := range []string{filepath.Join(f.base, "swapped", "other"), filepath.Join(f.base, "etc", "ssl")} {
		spec := f.spec()
		spec.GroupDir = dir
		o := f.sh(t, spec, "ls /workspace/group")
		require.Error(t, o.err, dir)
		assert.Contains(t, o.err.Error(), "not followed", dir)
		assert.Empty(t, o.stdout, dir)
	}
}

func TestUnreachableSourceIsClearError(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to build a directory the sandbox user cannot traverse")
	}
	f := newFixture(t, nil)
	private := filepath.Join(f.base, "private")
	group := filepath.Join(private, "groups", "foo")
	require.NoError(t, os.MkdirAll(group, 0o755))
	require.NoError(t, os.Chown(group, sandboxUID, sandboxGID))
	require.NoError(t, os.Chmod(private, 0o700))
	spec := f.spec()
	spec.GroupDir = group
	o := f.sh(t, spec, "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "sandbox user uid 1000 cannot reach "+group)
	assert.Contains(t, o.err.Error(), "chmod o+x "+private)
}

func TestBwrapSetupFailureIsError(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to revoke the sandbox user's access after the preflight")
	}
	f := newFixture(t, nil)
	// Revoke access between the preflight and bwrap's own resolution: bwrap
	// fails, and Run must say so rather than report an agent exit code.
	f.b.afterOpen = func() { require.NoError(t, os.Chmod(f.base, 0o700)) }
	o := f.sh(t, f.spec(), "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "bubblewrap could not build the sandbox")
	assert.Contains(t, o.err.Error(), "Permission denied")
}

func TestTimeoutKillsTree(t *testing.T) {
	f := newFixture(t, nil)
	m := marker(t)
	spec := f.spec()
	spec.Limits.Timeout = time.Second
	o := f.sh(t, spec, "sleep "+m+" & (setsid sleep "+m+" &) ; echo started; sleep "+m)
	require.NoError(t, o.err)
	assert.True(t, o.res.TimedOut)
	assert.Equal(t, "started\n", o.stdout)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.res.ExitCode)
	assert.Empty(t, processesWith(t, m))
}

func TestNoProcessOutlivesTheAgent(t *testing.T) {
	f := newFixture(t, nil)
	m := marker(t)
	// The agent leaves a background job and a double-forked daemon behind.
	o := f.sh(t, f.spec(), "sleep "+m+" & (setsid sh -c 'sleep "+m+" &' &); sleep 0.2; echo done")
	require.NoError(t, o.err)
	assert.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	assert.False(t, o.res.TimedOut)
	assert.Empty(t, processesWith(t, m))
}

func TestContextCancelKills(t *testing.T) {
	f := newFixture(t, nil)
	m := marker(t)
	ctx, cancel := context.WithCancel(context.Background())
	spec := f.spec()
	var out lineSignal
	out.ch = make(chan struct{})
	spec.Stdout = &out
	go func() {
		<-out.ch
		cancel()
	}()
	res, err := f.b.run(ctx, spec, []string{"/bin/sh", "-c", "echo up; sleep " + m})
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, res.TimedOut)
	assert.Empty(t, processesWith(t, m))
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
	spec := f.spec()
	spec.Limits.OutputBytes = 4096
	var out strings.Builder
	spec.Stdout = &out
	o := f.cmd(t, spec, "/usr/bin/yes", "clawpen")
	require.NoError(t, o.err)
	assert.True(t, o.res.OutputTruncated)
	assert.False(t, o.res.TimedOut)
	assert.Equal(t, 4096, out.Len())
	assert.True(t, strings.HasPrefix(out.String(), "clawpen\nclawpen\n"))
	assert.NotEqual(t, 0, o.res.ExitCode)
}

// The process limit is the sandbox's own (its cgroup), whoever else runs as
// the same user.
func TestProcessLimit(t *testing.T) {
	f := newFixture(t, nil)
	m := marker(t)
	spec := f.spec()
	spec.Limits.Pids = 16
	// Each line is one background process that was created.
	o := f.sh(t, spec, "i=0; while [ $i -lt 100 ]; do sleep "+m+" & echo $i; i=$((i+1)); done")
	require.NoError(t, o.err)
	assert.False(t, o.res.TimedOut)
	assert.NotEqual(t, 0, o.res.ExitCode)
	assert.Contains(t, o.res.Stderr, "fork")
	assert.Equal(t, sandbox.ProcessLimit, o.res.Limit, "the host read the refused fork from the cgroup")
	started := strings.Count(o.stdout, "\n")
	assert.Less(t, started, 16)
	assert.Greater(t, started, 0)
	assert.Empty(t, processesWith(t, m))
}

func TestForkBombContained(t *testing.T) {
	f := newFixture(t, nil)
	m := marker(t)
	spec := f.spec()
	spec.Limits.Pids = 32
	spec.Limits.Timeout = 3 * time.Second
	o := f.cmd(t, spec, "/bin/bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep "+m)
	require.NoError(t, o.err)
	assert.Empty(t, processesWith(t, m))
	// The host is fine: a fresh sandbox runs normally.
	o = f.sh(t, f.spec(), "echo alive")
	require.NoError(t, o.err)
	assert.Equal(t, "alive\n", o.stdout)
}

func TestMemoryLimit(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec()
	spec.Limits.MemoryBytes = 64 << 20
	// tail keeps a newline-free stream in memory until it ends; the cgroup's
	// OOM killer stops it, and the shell goes on.
	o := f.sh(t, spec, "head -c 500000000 /dev/zero | tail -n 1 | wc -c; echo after")
	require.NoError(t, o.err)
	assert.Equal(t, "0\nafter\n", o.stdout)
	assert.Equal(t, sandbox.MemoryLimit, o.res.Limit, "the host read the OOM kill from the cgroup")

	// The counters are the run's own cgroup's: the next run reached nothing.
	o = f.sh(t, spec, "head -c 50000000 /dev/zero | wc -c")
	require.NoError(t, o.err)
	assert.Empty(t, o.res.Limit)
}

func TestArgs(t *testing.T) {
	requireBwrap(t)
	u, g := runAs()
	b, err := New(Config{RunAsUID: u, RunAsGID: g, AgentBin: "/usr/bin/true"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	spec := sandbox.Spec{
		GroupDir: "/g", GlobalDir: "/gl", SessionDir: "/s", SocketPath: "/sock",
		Extra:  []sandbox.Mount{{HostPath: "/x", Name: "x", ReadOnly: true}, {HostPath: "/y", Name: "y"}},
		Env:    map[string]string{"B": "2", "A": "1", "PATH": "/evil"},
		Limits: sandbox.Limits{TmpBytes: 1234, ShmBytes: 5678},
	}
	args := strings.Join(b.Args(spec, "/bin/true"), " ")
	for _, want := range []string{
		"--dev /dev --size 5678 --perms 1777 --tmpfs /dev/shm --remount-ro /dev",
		"--unshare-all --unshare-user --disable-userns --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000 --hostname clawpen --clearenv",
		"--setenv A 1 --setenv B 2 --setenv HOME /home/agent --setenv USER agent --setenv PATH /usr/local/bin:/usr/bin:/bin --ro-bind /usr /usr",
		"--ro-bind-data 3 /etc/passwd",
		"--size 1234 --perms 1777 --tmpfs /tmp",
		"--info-fd 7",
		"--block-fd 8",
		"--bind-fd 9 /workspace/group",
		"--ro-bind-fd 10 /workspace/global",
		"--bind-fd 11 /home/agent",
		"--bind-fd 12 /run/clawpen/host.sock",
		"--ro-bind-fd 13 /opt/clawpen/bin/clawpen-agent",
		"--ro-bind-fd 14 /workspace/extra/x",
		"--bind-fd 15 /workspace/extra/y",
		"--proc /proc --dev /dev --size 5678 --perms 1777 --tmpfs /dev/shm --remount-ro /dev --ro-bind /dev/null /proc/keys",
		"--remount-ro / --seccomp 16 --info-fd 7 --block-fd 8 --sync-fd 17 --chdir /workspace/group -- /bin/true",
	} {
		assert.Contains(t, args, want)
	}
	assert.NotContains(t, args, "/evil")
	assert.True(t, strings.HasSuffix(args, "-- /bin/true"))
	// Nothing of the host's private trees.
	for _, bad := range []string{" /root", " /var", "bind /home", "docker.sock", "bind /etc "} {
		assert.NotContains(t, args, bad)
	}

	spec.GlobalWritable = true
	assert.Contains(t, strings.Join(b.Args(spec), " "), "--bind-fd 10 /workspace/global")
	assert.True(t, strings.HasSuffix(strings.Join(b.Args(spec), " "), "-- "+AgentPath))
}

// bwrap exits without reaping its namespace init; the backend must reap it
// itself so no zombie waits for PID 1 while counting against the process limit.
func TestNamespaceInitReaped(t *testing.T) {
	f := newFixture(t, nil)
	var pids []int
	f.b.sawInit = func(pid int) { pids = append(pids, pid) }
	for range 5 {
		o := f.cmd(t, f.spec(), "/bin/true")
		require.NoError(t, o.err)
		require.Equal(t, 0, o.res.ExitCode)
	}
	require.Len(t, pids, 5)
	for _, pid := range pids {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		assert.True(t, os.IsNotExist(err), "namespace init %d is still a process (zombie) after Run returned", pid)
	}
}

func TestExtraMountMasksAndWritePaths(t *testing.T) {
	f := newFixture(t, nil)
	proj := filepath.Join(f.base, "projects", "app")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "out"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(proj, ".ssh"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".env"), []byte("MASKED-SECRET"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".ssh", "id_rsa"), []byte("MASKED-KEY"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "main.go"), []byte("package main"), 0o644))
	if f.uid != os.Getuid() {
		require.NoError(t, os.Chown(filepath.Join(proj, "out"), f.uid, f.uid))
	}
	spec := f.spec()
	spec.Extra = []sandbox.Mount{{HostPath: proj, Name: "app", ReadOnly: true,
		Writable: []string{filepath.Join(proj, "out")},
		Masks:    []string{filepath.Join(proj, ".env"), filepath.Join(proj, ".ssh")}}}
	o := f.sh(t, spec, `cd /workspace/extra/app; cat main.go; echo; echo "env=[$(cat .env)]"; echo "ssh=[$(ls -A .ssh)]";
		echo built > out/bin && echo OUT-WRITTEN; touch main2.go 2>/dev/null && echo RO-BROKEN || echo RO-HELD;
		echo x > .env 2>/dev/null && echo MASK-WRITTEN || echo MASK-HELD`)
	require.NoError(t, o.err)
	for _, want := range []string{"package main", "env=[]", "ssh=[]", "OUT-WRITTEN", "RO-HELD", "MASK-HELD"} {
		assert.Contains(t, o.stdout, want)
	}
	assert.NotContains(t, o.stdout, "MASKED-")
	assert.FileExists(t, filepath.Join(proj, "out", "bin"))
	data, err := os.ReadFile(filepath.Join(proj, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "MASKED-SECRET", string(data), "the host file is untouched")
}

// etcListing is what `ls /etc` shows in the sandbox: the synthesised files and
// the top-level entries of what the host lends (which varies by host).
func etcListing(l sandbox.HostSystem) string {
	seen := map[string]bool{}
	for _, f := range sandbox.EtcFiles {
		seen[filepath.Base(f.Dest)] = true
	}
	for _, d := range l.EtcBinds {
		seen[strings.SplitN(strings.TrimPrefix(d, "/etc/"), "/", 2)[0]] = true
	}
	if l.HasLocal {
		seen["localtime"] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "\n") + "\n"
}

// A root host pins every bind source, so sources the sandbox user cannot
// traverse to (a project under a 0700 directory, like /root) still work.
func TestPinnedSourcesBehindClosedDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	var pins string
	f := newFixture(t, nil)
	pins = filepath.Join(f.base, "pins") // traversable, like /run/clawpen
	f.b.cfg.PinDir = pins
	closed := filepath.Join(f.base, "closed")
	require.NoError(t, os.MkdirAll(filepath.Join(closed, "groups", "team"), 0o755))
	require.NoError(t, os.Chmod(closed, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(closed, "groups", "team", "NOTE"), []byte("behind-0700"), 0o644))
	require.NoError(t, os.Chown(filepath.Join(closed, "groups", "team"), f.uid, f.uid))
	spec := f.spec()
	spec.GroupDir = filepath.Join(closed, "groups", "team")
	o := f.sh(t, spec, "cat /workspace/group/NOTE; echo; id -u; echo w > /workspace/group/out && echo WROTE")
	require.NoError(t, o.err)
	assert.Contains(t, o.stdout, "behind-0700")
	assert.Contains(t, o.stdout, "1000")
	assert.Contains(t, o.stdout, "WROTE")
	entries, err := os.ReadDir(pins)
	require.NoError(t, err)
	assert.Empty(t, entries, "staging binds are released after the run")
}

// Check's trial sandbox leaves no zombie behind either.
func TestCheckLeavesNoZombie(t *testing.T) {
	f := newFixture(t, nil)
	require.NoError(t, f.b.Check(context.Background()))
	out, err := exec.Command("ps", "-o", "stat=,comm=", "--ppid", strconv.Itoa(os.Getpid())).Output()
	if err != nil {
		out = nil // ps exits 1 when there are no children: nothing to find
	}
	for _, line := range strings.Split(string(out), "\n") {
		assert.False(t, strings.HasPrefix(line, "Z") && strings.Contains(line, "bwrap"), "zombie child: %q", line)
	}
}

// A root host shows groups/global to a non-main group as nobody's, through
// an idmapped pin (it belongs to the sandbox user, which every sandbox runs
// as), and to main as its own; its binds are nosuid,nodev, as is every
// writable tree the sandbox sees.
func TestGlobalNobodysToNonMainAndBindsNosuid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	f := newFixture(t, nil)
	f.b.cfg.PinDir = filepath.Join(f.base, "pins")
	script := `stat -c '%u' /workspace/global /workspace/global/MEMORY.md /workspace/group
for m in /workspace/group /workspace/global /home/agent /tmp /dev; do echo "$m $(awk -v m=$m '$5 == m {print $6}' /proc/self/mountinfo)"; done`
	o := f.sh(t, f.spec(), script)
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	require.Len(t, lines, 8, o.stdout)
	assert.Equal(t, []string{"65534", "65534", "1000"}, lines[:3], "global is nobody's to a non-main group")
	for _, l := range lines[3:] {
		opts := strings.Split(strings.Fields(l + " -")[1], ",")
		assert.Subset(t, opts, []string{"nosuid", "nodev"}, l)
	}

	spec := f.spec()
	spec.IsMain, spec.GlobalWritable = true, true
	o = f.sh(t, spec, "stat -c '%u' /workspace/global/MEMORY.md; echo x >> /workspace/global/MEMORY.md && echo WROTE")
	require.NoError(t, o.err)
	assert.Equal(t, "1000\nWROTE\n", o.stdout, "main owns and writes global")
}

// A whole sandbox run of /bin/true, as Run does it: the bind sources, the
// cgroup, bwrap started in it, the limits, the teardown. Besides the wall
// time, the CPU time of the host and its reaped children (bwrap and, as
// its init's reaper, the sandbox) per run: on a shared, busy machine the
// wall time is mostly waiting for a CPU.
func BenchmarkRun(b *testing.B) {
	f := newFixture(b, nil)
	cpu := func() time.Duration {
		var self, kids syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
		var d time.Duration
		for _, r := range []syscall.Rusage{self, kids} {
			d += time.Duration(r.Utime.Nano() + r.Stime.Nano())
		}
		return d
	}
	before := cpu()
	for b.Loop() {
		o := f.cmd(b, f.spec(), "/bin/true")
		require.NoError(b, o.err)
	}
	b.ReportMetric(float64((cpu()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
