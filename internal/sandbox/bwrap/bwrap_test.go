package bwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
)

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

func TestUnreachableSourceIsClearError(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to build a directory the sandbox user cannot traverse")
	}
	f := newFixture(t, nil)
	private := filepath.Join(f.Base, "private")
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
	f.b.afterOpen = func() { require.NoError(t, os.Chmod(f.Base, 0o700)) }
	o := f.sh(t, f.spec(), "true")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "bubblewrap could not build the sandbox")
	assert.Contains(t, o.err.Error(), "Permission denied")
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
