package sandboxtest

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// tests is the suite, in the order it runs.
var tests = []test{
	{name: "Check", f: testCheck},
	{name: "View", f: testView},
	{name: "WritesLandOnHostAsSandboxUser", f: testWritesLandOnHostAsSandboxUser},
	{name: "GlobalWritableForMain", f: testGlobalWritableForMain},
	{name: "NoSessionDirGetsPrivateHome", f: testNoSessionDirGetsPrivateHome},
	{name: "ExtraMounts", f: testExtraMounts},
	{name: "ExtraMountMasksAndWritePaths", subs: []string{"MaskRefusesWrites"}, f: testExtraMountMasksAndWritePaths},
	{name: "EnvironmentIsAllowlistOnly", f: testEnvironmentIsAllowlistOnly},
	{name: "InheritedDescriptorsDoNotLeak", f: testInheritedDescriptorsDoNotLeak},
	{name: "PlantedSecretsUnreachable", f: testPlantedSecretsUnreachable},
	{name: "SymlinkResolvesInside", f: testSymlinkResolvesInside},
	{name: "HostSocketIsBound", subs: []string{"IPC"}, f: testHostSocketIsBound},
	{name: "NoNetwork", f: testNoNetwork},
	{name: "StdinReachesCommand", f: testStdinReachesCommand},
	{name: "SetupFailureIsError", f: testSetupFailureIsError},
	{name: "PerProcessLimits", f: testPerProcessLimits},
	{name: "TimeoutKillsTree", f: testTimeoutKillsTree},
	{name: "NoProcessOutlivesTheRun", f: testNoProcessOutlivesTheRun},
	{name: "ContextCancelKills", f: testContextCancelKills},
	{name: "OutputCapKills", f: testOutputCapKills},
	{name: "StderrTail", f: testStderrTail},
	{name: "ProcessLimit", subs: []string{"Reported"}, f: testProcessLimit},
	{name: "ProcessLimitReportedWhileRunning", f: testProcessLimitReportedWhileRunning},
	{name: "ForkBombContained", f: testForkBombContained},
	{name: "MemoryLimitKillsAProcess", f: testMemoryLimitKillsAProcess},
	{name: "MemoryLimitKillsTheCommand", f: testMemoryLimitKillsTheCommand},
	{name: "PinnedWritesLandOnHostAsOwner", f: testPinnedWritesLandOnHostAsOwner},
	{name: "PinnedSourcesBehindClosedDirectory", f: testPinnedSourcesBehindClosedDirectory},
	{name: "PinnedGlobalNobodysToNonMain", f: testPinnedGlobalNobodysToNonMain},
	{name: "PinnedBindsNosuidNodev", subs: []string{"Flags", "Dev"}, f: testPinnedBindsNosuidNodev},
	{name: "SymlinkAboveSourceRefused", f: testSymlinkAboveSourceRefused},
	{name: "SymlinkSwapAfterOpen", f: testSymlinkSwapAfterOpen},
	{name: "PinnedSymlinkSwapAfterOpen", f: func(t *testing.T, s *suite, l *Layout) {
		testSymlinkSwapAfterOpen(t, s.pinned(t, l), l)
	}},
	{name: "PinnedSymlinkAboveSourceRefused", f: func(t *testing.T, s *suite, l *Layout) {
		testSymlinkAboveSourceRefused(t, s.pinned(t, l), l)
	}},
}

func testCheck(t *testing.T, s *suite, _ *Layout) {
	require.NoError(t, s.b.Check(context.Background()))
	assert.Equal(t, s.p.Name, s.b.Name())
}

// The probes use shell builtins, globs, test and find rather than
// coreutils stat and ls: runsc 2022-12-19 refuses the statx flag
// (AT_NO_AUTOMOUNT) they pass, and an ls that fails would pass a test
// that wants nothing listed.

// listFDs lists the shell's open descriptors, one a line.
const listFDs = "for f in /proc/self/fd/*; do echo ${f##*/}; done"

// sharedView is what every backend's sandbox looks like from inside.
var sharedView = []ViewCase{
	{Name: "ids", Script: "id -u; id -g; id -un", Out: "1000\n1000\nagent\n"},
	{Name: "hostname", Script: "hostname", Out: "clawpen\n"},
	{Name: "cwd", Script: "pwd", Out: "/workspace/group\n"},
	{Name: "group readable", Script: "cat /workspace/group/ORIGINAL", Out: "mine"},
	{Name: "global readable", Script: "cat /workspace/global/MEMORY.md", Out: "global"},
	{Name: "global read-only", Script: "touch /workspace/global/x", Exit: 1, Stderr: readOnly, notOwned: true},
	{Name: "usr read-only", Script: "touch /usr/x", Exit: 1, Stderr: readOnly, notOwned: true},
	{Name: "root read-only", Script: "mkdir /newdir", Exit: 1, Stderr: "Read-only file system"},
	// The exit code of a failed redirection is the shell's (dash 2, ash 1);
	// the error is the file's (an image's /etc/passwd is root's: EACCES).
	{Name: "etc read-only", Script: "echo x >> /etc/passwd", Exit: -1},
	{Name: "tmp writable", Script: "echo a > /tmp/a && cat /tmp/a && find /tmp -maxdepth 0 -perm 1777", Out: "a\n/tmp\n"},
	{Name: "tmp size capped", Script: "head -c 2097152 /dev/zero > /tmp/big", Exit: 1},
	{Name: "tmp nosuid nodev", Script: "grep ' /tmp ' /proc/mounts | grep -c 'nosuid,nodev'", Out: "1\n"},
	{Name: "no capabilities", Script: "grep -E '^(CapInh|CapEff|CapPrm|CapBnd):' /proc/self/status | tr -s '\t ' ' '",
		Out: "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\n"},
	{Name: "no ambient capabilities, no new privileges", Script: "grep -E '^(CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '",
		Out: "CapAmb: 0000000000000000\nNoNewPrivs: 1\n"},
	{Name: "only loopback", Script: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", Out: "lo\n"},
	{Name: "no default route", Script: "tail -n +2 /proc/net/route | wc -l", Out: "0\n"},
	{Name: "no nested user namespaces", Script: "unshare -U true", Exit: 1},
	{Name: "no docker socket", Script: "test -e /var/run/docker.sock || test -e /run/docker.sock", Exit: 1},
	// The shell's own descriptors; 3 is the directory its glob reads.
	{Name: "no inherited descriptors", Script: listFDs, Out: "0\n1\n2\n3\n"},
	// The namespace's init too: it could otherwise be made to do what the
	// command may not.
	{Name: "seccomp filter", Script: "grep -h ^Seccomp: /proc/self/status /proc/1/status | tr -s '\t ' ' '", Out: "Seccomp: 2\nSeccomp: 2\n"},
	{Name: "proc keys hidden", Script: "cat /proc/keys 2>/dev/null | wc -c", Out: "0\n"},
	{Name: "host socket dir", Script: "test -d /run/clawpen && echo ok", Out: "ok\n"},
	{Name: "stdin closed", Script: "cat; echo eof", Out: "eof\n"},
}

const readOnly = "Read-only file system"

// testView checks each property of the sandbox contract from inside.
func testView(t *testing.T, s *suite, l *Layout) {
	for _, tc := range append(append([]ViewCase(nil), sharedView...), s.p.View...) {
		t.Run(tc.Name, func(t *testing.T) {
			s.skip(t, "View/"+tc.Name)
			if tc.notOwned && s.p.ReadOnlyError != "" {
				tc.Stderr = s.p.ReadOnlyError
			}
			o := s.sh(t, l.Spec(), tc.Script)
			require.NoError(t, o.Err)
			if tc.Exit == -1 {
				assert.NotEqual(t, 0, o.Res.ExitCode, "stdout: %s", o.Stdout)
			} else {
				assert.Equal(t, tc.Exit, o.Res.ExitCode, "stderr: %s", o.Res.Stderr)
			}
			if tc.Out != "" {
				assert.Equal(t, tc.Out, o.Stdout)
			}
			if tc.Stderr != "" {
				assert.Contains(t, o.Res.Stderr, tc.Stderr)
			}
			assert.False(t, o.Res.TimedOut)
			assert.False(t, o.Res.OutputTruncated)
		})
	}
}

func testWritesLandOnHostAsSandboxUser(t *testing.T, s *suite, l *Layout) {
	o := s.sh(t, l.Spec(), "echo hi > /workspace/group/new.txt && echo s > /home/agent/state && mkdir /workspace/group/d")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	for _, p := range []string{filepath.Join(l.Group, "new.txt"), filepath.Join(l.Session, "state"), filepath.Join(l.Group, "d")} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{uint32(s.p.UID), uint32(s.p.GID)}, [2]uint32{st.Uid, st.Gid}, p)
	}
	_, err := os.Stat(filepath.Join(l.Global, "x"))
	assert.True(t, os.IsNotExist(err))
}

func testGlobalWritableForMain(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.IsMain, spec.GlobalWritable = true, true
	o := s.sh(t, spec, "echo note >> /workspace/global/MEMORY.md")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	b, err := os.ReadFile(filepath.Join(l.Global, "MEMORY.md"))
	require.NoError(t, err)
	assert.Equal(t, "globalnote\n", string(b))
}

func testNoSessionDirGetsPrivateHome(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.SessionDir = ""
	o := s.sh(t, spec, "echo x > /home/agent/f && find /home/agent -maxdepth 0 -user 1000 -perm 700")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, "/home/agent\n", o.Stdout)
}

func testExtraMounts(t *testing.T, s *suite, l *Layout) {
	ro := filepath.Join(l.Base, "projects", "ro")
	rw := filepath.Join(l.Base, "projects", "rw")
	for _, d := range []string{ro, rw} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "README"), []byte(filepath.Base(d)), 0o644))
		require.NoError(t, l.Own(d))
	}
	spec := l.Spec()
	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "docs", ReadOnly: true}, {HostPath: rw, Name: "code"}}
	o := s.sh(t, spec, "cat /workspace/extra/docs/README /workspace/extra/code/README; touch /workspace/extra/code/new; touch /workspace/extra/docs/new")
	require.NoError(t, o.Err)
	assert.Equal(t, "rorw", o.Stdout)
	assert.Equal(t, 1, o.Res.ExitCode, "only the read-only touch fails")
	assert.FileExists(t, filepath.Join(rw, "new"))
	assert.NoFileExists(t, filepath.Join(ro, "new"))

	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "../escape"}}
	o = s.sh(t, spec, "true")
	require.Error(t, o.Err)
	assert.Contains(t, o.Err.Error(), "invalid extra mount name")
}

func testExtraMountMasksAndWritePaths(t *testing.T, s *suite, l *Layout) {
	proj := filepath.Join(l.Base, "projects", "app")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "out"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(proj, ".ssh"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".env"), []byte("MASKED-SECRET"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".ssh", "id_rsa"), []byte("MASKED-KEY"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "main.go"), []byte("package main"), 0o644))
	require.NoError(t, l.Own(filepath.Join(proj, "out")))
	spec := l.Spec()
	spec.Extra = []sandbox.Mount{{HostPath: proj, Name: "app", ReadOnly: true,
		Writable: []string{filepath.Join(proj, "out")},
		Masks:    []string{filepath.Join(proj, ".env"), filepath.Join(proj, ".ssh")}}}
	o := s.sh(t, spec, `cd /workspace/extra/app; cat main.go; echo; echo "env=[$(cat .env)]"; echo "ssh=[$(find .ssh -mindepth 1)]";
		echo built > out/bin && echo OUT-WRITTEN; touch main2.go 2>/dev/null && echo RO-BROKEN || echo RO-HELD;
		echo x > .env 2>/dev/null && echo MASK-WRITTEN || echo MASK-HELD`)
	require.NoError(t, o.Err)
	for _, want := range []string{"package main", "env=[]", "ssh=[]", "OUT-WRITTEN", "RO-HELD"} {
		assert.Contains(t, o.Stdout, want)
	}
	assert.NotContains(t, o.Stdout, "MASKED-")
	assert.FileExists(t, filepath.Join(proj, "out", "bin"))
	data, err := os.ReadFile(filepath.Join(proj, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "MASKED-SECRET", string(data), "the host file is untouched")
	s.sub(t, "ExtraMountMasksAndWritePaths", "MaskRefusesWrites", func(t *testing.T) {
		assert.Contains(t, o.Stdout, "MASK-HELD")
	})
}

func testEnvironmentIsAllowlistOnly(t *testing.T, s *suite, l *Layout) {
	t.Setenv("CLAWPEN_TEST_SECRET", "leak")
	spec := l.Spec()
	// Fixed variables cannot be overridden.
	spec.Env["HOME"] = "/root"
	spec.Env["PATH"] = "/evil"
	o := s.cmd(t, spec, "/usr/bin/env")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
	sort.Strings(lines)
	want := append([]string{
		"CLAWPEN_ASSISTANT_NAME=Andy",
		"HOME=/home/agent",
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC",
		"USER=agent",
	}, s.p.Env...)
	sort.Strings(want)
	assert.Equal(t, want, lines)

	spec.Env = map[string]string{"BAD=NAME": "x"}
	o = s.cmd(t, spec, "/usr/bin/env")
	require.Error(t, o.Err)
	assert.Contains(t, o.Err.Error(), "invalid environment variable name")
}

func testInheritedDescriptorsDoNotLeak(t *testing.T, s *suite, l *Layout) {
	secret, err := os.Open(filepath.Join(l.Home, ".ssh", "id_rsa"))
	require.NoError(t, err)
	defer secret.Close()
	// syscall.Dup makes a descriptor without close-on-exec, like one
	// inherited from the host's parent process.
	fd, err := syscall.Dup(int(secret.Fd()))
	require.NoError(t, err)
	defer syscall.Close(fd)
	o := s.sh(t, l.Spec(), listFDs+"; cat <&"+strconv.Itoa(fd))
	require.NoError(t, o.Err)
	assert.Equal(t, "0\n1\n2\n3\n", o.Stdout)
	assert.NotEqual(t, 0, o.Res.ExitCode)
}

func testPlantedSecretsUnreachable(t *testing.T, s *suite, l *Layout) {
	// Search every file name the sandbox can see; /proc, /sys and /dev are
	// not data.
	o := s.sh(t, l.Spec(), `find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name id_rsa -o -name OTHER_GROUP_SECRET -o -name 'clawpen-*-test-*' -o -name docker.sock \) -print 2>/dev/null
grep -rl 'FAKE PRIVATE KEY' /workspace /home /tmp /etc /run 2>/dev/null
for d in /work /data `+l.Base+` `+l.Home+`; do test -e $d && echo $d; done; echo END`)
	require.NoError(t, o.Err)
	assert.Equal(t, "END\n", o.Stdout, "no secret found, no host path seen (stderr: %s)", o.Res.Stderr)
}

// A symlink in the group's folder to the host's planted key resolves in
// the sandbox's view, where that path does not exist.
func testSymlinkResolvesInside(t *testing.T, s *suite, l *Layout) {
	require.NoError(t, os.Symlink(filepath.Join(l.Home, ".ssh", "id_rsa"), filepath.Join(l.Group, "link")))
	o := s.sh(t, l.Spec(), "test -L /workspace/group/link && echo LINK; cat /workspace/group/link 2>/dev/null || echo UNREADABLE")
	require.NoError(t, o.Err)
	assert.Equal(t, "LINK\nUNREADABLE\n", o.Stdout)
}

func testHostSocketIsBound(t *testing.T, s *suite, l *Layout) {
	uid, gid := -1, -1
	if os.Getuid() == 0 {
		uid, gid = s.p.UID, s.p.GID
	}
	// The real host socket: 0600, owned by the sandbox user.
	srv, err := hostsock.Listen(l.Sock, uid, gid, domain.Caller{Group: "team", Run: "test"}, hostsock.Config{
		IPC: func(_ context.Context, id domain.Caller, op string, body []byte) (int, any) {
			return http.StatusOK, map[string]string{"group": id.Group, "op": op, "body": string(body)}
		},
	})
	require.NoError(t, err)
	defer srv.Close()

	spec := l.Spec()
	spec.SocketPath = l.Sock
	o := s.sh(t, spec, `test -S /run/clawpen/host.sock && test -w /run/clawpen/host.sock || exit 3
echo bound; command -v curl >/dev/null || exit 0
curl -s --unix-socket /run/clawpen/host.sock -d '{"group":"main"}' http://clawpen/ipc/ping`)
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	bound, answer, _ := strings.Cut(o.Stdout, "\n")
	assert.Equal(t, "bound", bound)
	s.sub(t, "HostSocketIsBound", "IPC", func(t *testing.T) {
		if answer == "" {
			t.Skip("no curl in the sandbox to speak HTTP over the socket")
		}
		// The host names the caller; what the sandbox claims is only a body.
		assert.Equal(t, `{"body":"{\"group\":\"main\"}","group":"team","op":"ping"}`+"\n", answer)
	})
}

// testNoNetwork tries to reach a listener on each of the host's own
// addresses, loopback included.
func testNoNetwork(t *testing.T, s *suite, l *Layout) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	defer ln.Close()
	// Accept and count: a connection that only waits in the backlog would
	// be missed by an Accept after the fact.
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
	require.Contains(t, targets, "127.0.0.1")
	script := "fail=0; for ip in " + strings.Join(targets, " ") + "; do " +
		"if command -v bash >/dev/null; then timeout 3 bash -c \"echo hi > /dev/tcp/$ip/" + port + "\" && fail=1; " +
		"else echo hi | timeout 3 nc $ip " + port + " && fail=1; fi; done; exit $fail"
	o := s.sh(t, l.Spec(), script)
	require.NoError(t, o.Err)
	assert.Equal(t, 0, o.Res.ExitCode, "a connection succeeded: %s", o.Res.Stderr)
	// The sandbox's own loopback has nobody listening.
	assert.Contains(t, o.Res.Stderr, "Connection refused")
	require.NoError(t, ln.Close())
	assert.Equal(t, 0, <-accepted, "connections from the sandbox reached the host")
}

func testStdinReachesCommand(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.Stdin = []byte(`{"prompt":"hi \u0010\u0011"}` + strings.Repeat("x", 256<<10))
	o := s.cmd(t, spec, "/bin/cat")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, string(spec.Stdin), o.Stdout)
}

func testSetupFailureIsError(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.GroupDir = filepath.Join(l.Base, "does-not-exist")
	o := s.sh(t, spec, "echo ran")
	require.Error(t, o.Err)
	assert.Contains(t, o.Err.Error(), "does-not-exist")
	assert.Empty(t, o.Stdout)
}

// The command sees its per-process limits (sandbox.FileSizeLimit …) from
// its first instruction. Memory and processes are the cgroup's, not
// rlimits: address space stays unlimited so that programs reserving it
// still start.
func testPerProcessLimits(t *testing.T, s *suite, l *Layout) {
	// The shell's ulimit (gVisor has no /proc/self/limits); -f counts
	// 512-byte blocks.
	o := s.sh(t, l.Spec(), "for r in v n c f; do echo $r $(ulimit -S$r) $(ulimit -H$r); done")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	files := strconv.Itoa(sandbox.OpenFilesLimit)
	blocks := strconv.Itoa(sandbox.FileSizeLimit / 512)
	assert.Equal(t, "v unlimited unlimited\nn "+files+" "+files+"\nc 0 0\nf "+blocks+" "+blocks+"\n", o.Stdout,
		"address space, open files, core size, file size: soft and hard")
}

func testTimeoutKillsTree(t *testing.T, s *suite, l *Layout) {
	m := Marker()
	spec := l.Spec()
	spec.Limits.Timeout = 2 * time.Second
	o := s.sh(t, spec, "sleep "+m+" & (setsid sleep "+m+" &) ; echo started; sleep "+m)
	require.NoError(t, o.Err)
	assert.True(t, o.Res.TimedOut)
	assert.Equal(t, "started\n", o.Stdout)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.Res.ExitCode)
	assert.Empty(t, ProcessesWith(t, m))
}

func testNoProcessOutlivesTheRun(t *testing.T, s *suite, l *Layout) {
	m := Marker()
	// The command leaves a background job and a double-forked daemon
	// behind.
	o := s.sh(t, l.Spec(), "sleep "+m+" & (setsid sh -c 'sleep "+m+" &' &); sleep 0.2; echo done")
	require.NoError(t, o.Err)
	assert.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, "done\n", o.Stdout)
	assert.False(t, o.Res.TimedOut)
	assert.Empty(t, ProcessesWith(t, m))
}

func testContextCancelKills(t *testing.T, s *suite, l *Layout) {
	m := Marker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec := l.Spec()
	out := &firstWrite{ch: make(chan struct{})}
	spec.Stdout = out
	go func() {
		<-out.ch
		cancel()
	}()
	o := s.run(t, ctx, spec, "/bin/sh", "-c", "echo up; sleep "+m)
	require.ErrorIs(t, o.Err, context.Canceled)
	assert.True(t, o.Res.TimedOut)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.Res.ExitCode)
	assert.Empty(t, ProcessesWith(t, m))
}

// firstWrite closes ch on the first write.
type firstWrite struct {
	ch   chan struct{}
	done bool
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}

func testOutputCapKills(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.Limits.OutputBytes = 4096
	var out strings.Builder
	spec.Stdout = &out
	o := s.sh(t, spec, "yes clawpen")
	require.NoError(t, o.Err)
	assert.True(t, o.Res.OutputTruncated)
	assert.False(t, o.Res.TimedOut)
	assert.Equal(t, 4096, out.Len())
	assert.True(t, strings.HasPrefix(out.String(), "clawpen\nclawpen\n"))
	assert.NotEqual(t, 0, o.Res.ExitCode)
}

func testStderrTail(t *testing.T, s *suite, l *Layout) {
	o := s.sh(t, l.Spec(), "head -c 20000 /dev/zero | tr '\\0' a >&2; echo END >&2; echo out; exit 3")
	require.NoError(t, o.Err)
	assert.Equal(t, 3, o.Res.ExitCode)
	assert.Equal(t, "out\n", o.Stdout)
	assert.Len(t, o.Res.Stderr, s.p.StderrTail)
	assert.True(t, strings.HasSuffix(o.Res.Stderr, "aaaEND\n"))
}

// The process limit is the sandbox's own (its cgroup), whoever else runs
// as the same user.
func testProcessLimit(t *testing.T, s *suite, l *Layout) {
	m := Marker()
	spec := l.Spec()
	spec.Limits.Pids = 16
	// Each line is one background process that was created.
	o := s.sh(t, spec, "i=0; while [ $i -lt 100 ]; do sleep "+m+" & echo $i; i=$((i+1)); done")
	require.NoError(t, o.Err)
	assert.False(t, o.Res.TimedOut)
	assert.NotEqual(t, 0, o.Res.ExitCode)
	assert.Contains(t, strings.ToLower(o.Res.Stderr), "fork")
	started := strings.Count(o.Stdout, "\n")
	assert.Less(t, started, 16)
	assert.Greater(t, started, 0)
	assert.Empty(t, ProcessesWith(t, m))
	s.sub(t, "ProcessLimit", "Reported", func(t *testing.T) {
		assert.Equal(t, sandbox.ProcessLimit, o.Res.Limit, "the host read the refused fork from the kernel")
	})
}

// The host learns that a sandbox reached its process limit while it runs
// on: here the shell outlives the refused fork until the wall clock ends
// it, forking nothing more. Nothing runs before the job is given, as for
// the agent.
func testProcessLimitReportedWhileRunning(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.Limits.Pids = 16
	spec.Limits.Timeout = 2 * time.Second
	spec.Stdin = []byte("go\n")
	o := s.sh(t, spec, "read -r go; mkfifo /tmp/f; exec 3<>/tmp/f; (while :; do sleep 900 & done) 2>/dev/null; echo FORK-REFUSED; read -r x <&3")
	require.NoError(t, o.Err)
	assert.Equal(t, "FORK-REFUSED\n", o.Stdout)
	assert.True(t, o.Res.TimedOut)
	assert.Equal(t, sandbox.ProcessLimit, o.Res.Limit)
}

func testForkBombContained(t *testing.T, s *suite, l *Layout) {
	m := Marker()
	spec := l.Spec()
	spec.Limits.Pids = 32
	spec.Limits.Timeout = 3 * time.Second
	o := s.sh(t, spec, "bomb() { bomb | bomb & }; bomb; sleep "+m)
	require.NoError(t, o.Err)
	// Either the wall clock ended it or the shell could not fork its sleep.
	assert.True(t, o.Res.TimedOut || o.Res.ExitCode != 0, "exit %d", o.Res.ExitCode)
	assert.Empty(t, ProcessesWith(t, m))
	// The host is fine: a fresh sandbox runs normally.
	o = s.sh(t, l.Spec(), "echo alive")
	require.NoError(t, o.Err)
	assert.Equal(t, "alive\n", o.Stdout)
}

// The OOM killer stops one process of the sandbox (tail keeps a
// newline-free stream in memory until it ends), and the command goes on.
func testMemoryLimitKillsAProcess(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.Limits.MemoryBytes = 64 << 20
	o := s.sh(t, spec, "head -c 500000000 /dev/zero | tail -n 1 | wc -c; echo after")
	require.NoError(t, o.Err)
	assert.Equal(t, "0\nafter\n", o.Stdout)
	assert.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, sandbox.MemoryLimit, o.Res.Limit, "the host read the OOM kill from the kernel")

	// The counters are the run's own: the next run reached nothing.
	o = s.sh(t, spec, "head -c 50000000 /dev/zero | wc -c")
	require.NoError(t, o.Err)
	assert.Empty(t, o.Res.Limit, "a run within its limits reached none")
}

// The OOM killer stops the command itself: command substitution keeps the
// whole 300 MB in the shell's memory.
func testMemoryLimitKillsTheCommand(t *testing.T, s *suite, l *Layout) {
	spec := l.Spec()
	spec.Limits.MemoryBytes = 64 << 20
	o := s.sh(t, spec, "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived ${#x}")
	require.NoError(t, o.Err)
	assert.Equal(t, 128+int(syscall.SIGKILL), o.Res.ExitCode)
	assert.Equal(t, sandbox.MemoryLimit, o.Res.Limit)
	assert.Empty(t, o.Stdout)
	assert.False(t, o.Res.TimedOut)
}

// pinned is the backend as a root host runs it, over l.
func (s *suite) pinned(t *testing.T, l *Layout) *suite {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("pinning bind sources needs root")
	}
	if s.p.Pinned == nil {
		t.Skip(s.p.Name + " pins no bind sources (no Params.Pinned)")
	}
	return &suite{p: s.p, b: s.p.Pinned(t, l), known: s.known, pins: l.Pins}
}

// Inside, the sandbox is uid 1000 and owns its folders; on disk, what it
// wrote belongs to the folders' owner (an idmapped pin's disk user), never
// to whoever else holds uid 1000 on the host.
func testPinnedWritesLandOnHostAsOwner(t *testing.T, s *suite, l *Layout) {
	s = s.pinned(t, l)
	o := s.sh(t, l.Spec(), "id -u; find /workspace/group /home/agent -maxdepth 0 -user 1000 -group 1000; echo hi > /workspace/group/new.txt && echo s > /home/agent/state && mkdir /workspace/group/d && echo WROTE")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, "1000\n/workspace/group\n/home/agent\nWROTE\n", o.Stdout)
	for _, p := range []string{filepath.Join(l.Group, "new.txt"), filepath.Join(l.Session, "state"), filepath.Join(l.Group, "d")} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{uint32(l.UID), uint32(l.GID)}, [2]uint32{st.Uid, st.Gid}, p)
	}
}

// Pinned sources need no path the sandbox user can traverse: a project
// under a 0700 directory (like /root) is bound all the same.
func testPinnedSourcesBehindClosedDirectory(t *testing.T, s *suite, l *Layout) {
	s = s.pinned(t, l)
	closed := filepath.Join(l.Base, "closed")
	group := filepath.Join(closed, "groups", "team")
	require.NoError(t, os.MkdirAll(group, 0o755))
	require.NoError(t, os.Chmod(closed, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(group, "NOTE"), []byte("behind-0700"), 0o644))
	require.NoError(t, l.Own(group))
	spec := l.Spec()
	spec.GroupDir = group
	o := s.sh(t, spec, "cat /workspace/group/NOTE; echo; id -u; echo w > /workspace/group/out && echo WROTE")
	require.NoError(t, o.Err)
	assert.Equal(t, "behind-0700\n1000\nWROTE\n", o.Stdout)
}

// groups/global belongs to the sandbox user, whom every sandbox writes as
// (through an idmapped pin where the backend maps): a non-main group sees
// it as nobody's, main as its own.
func testPinnedGlobalNobodysToNonMain(t *testing.T, s *suite, l *Layout) {
	s = s.pinned(t, l)
	o := s.sh(t, l.Spec(), "find /workspace/global /workspace/global/MEMORY.md -maxdepth 0 -user 65534; find /workspace/group -maxdepth 0 -user 1000")
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	assert.Equal(t, "/workspace/global\n/workspace/global/MEMORY.md\n/workspace/group\n", o.Stdout, "global is nobody's to a non-main group")

	spec := l.Spec()
	spec.IsMain, spec.GlobalWritable = true, true
	o = s.sh(t, spec, "find /workspace/global/MEMORY.md -user 1000; echo x >> /workspace/global/MEMORY.md && echo WROTE")
	require.NoError(t, o.Err)
	assert.Equal(t, "/workspace/global/MEMORY.md\nWROTE\n", o.Stdout, "main owns and writes global")
}

// The sandbox's own mount table: every bind of a host tree, read-only ones
// included, and every writable tree it has is nosuid,nodev, and read-only
// ones stay read-only.
func testPinnedBindsNosuidNodev(t *testing.T, s *suite, l *Layout) {
	s = s.pinned(t, l)
	ro := filepath.Join(l.Base, "projects", "ro")
	rw := filepath.Join(l.Base, "projects", "rw")
	for _, d := range []string{ro, rw} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, l.Own(d))
	}
	spec := l.Spec()
	spec.Extra = []sandbox.Mount{{HostPath: ro, Name: "docs", ReadOnly: true}, {HostPath: rw, Name: "code"}}
	o := s.sh(t, spec, `for m in /workspace/group /workspace/global /home/agent /tmp /dev /workspace/extra/docs /workspace/extra/code; do
  echo "$m $(awk -v m=$m '$5 == m {print $6}' /proc/self/mountinfo)"; done
touch /workspace/global/x 2>/dev/null && echo GLOBAL-WRITABLE; touch /workspace/extra/docs/x 2>/dev/null && echo DOCS-WRITABLE; true`)
	require.NoError(t, o.Err)
	require.Equal(t, 0, o.Res.ExitCode, o.Res.Stderr)
	lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
	require.Len(t, lines, 7, o.Stdout)
	opts := func(l string) []string { return strings.Split(strings.Fields(l + " -")[1], ",") }
	assert.Contains(t, opts(lines[1]), "ro", "global is read-only for a non-main group")
	assert.Contains(t, opts(lines[5]), "ro")
	assert.Contains(t, opts(lines[6]), "rw")
	assert.NotContains(t, o.Stdout, "WRITABLE")
	s.sub(t, "PinnedBindsNosuidNodev", "Flags", func(t *testing.T) {
		for i, l := range lines {
			if i != 4 {
				assert.Subset(t, opts(l), []string{"nosuid", "nodev"}, l)
			}
		}
	})
	s.sub(t, "PinnedBindsNosuidNodev", "Dev", func(t *testing.T) {
		assert.Subset(t, opts(lines[4]), []string{"nosuid", "nodev"}, lines[4])
	})
}

// A bind source whose parent was swapped for a symlink since it was
// resolved, to another group's folder or to /etc, is refused, not bound.
func testSymlinkAboveSourceRefused(t *testing.T, s *suite, l *Layout) {
	require.NoError(t, os.Symlink(filepath.Dir(l.Other), filepath.Join(l.Base, "swapped")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(l.Base, "etc")))
	for _, dir := range []string{filepath.Join(l.Base, "swapped", "other"), filepath.Join(l.Base, "etc", "ssl")} {
		spec := l.Spec()
		spec.GroupDir = dir
		o := s.sh(t, spec, "echo /workspace/group/*")
		require.Error(t, o.Err, dir)
		assert.Contains(t, o.Err.Error(), "not followed", dir)
		assert.Empty(t, o.Stdout, dir)
	}
}

// An attacker replaces validated bind sources with symlinks once the
// backend has opened them: the group's folder with one to the other
// group's, an extra mount with one to /. The sandbox still gets the
// originals; the next run refuses the symlinks outright.
func testSymlinkSwapAfterOpen(t *testing.T, s *suite, l *Layout) {
	if s.p.AfterOpen == nil {
		t.Skip(s.p.Name + " has no hook once its bind sources are open (no Params.AfterOpen)")
	}
	proj := filepath.Join(l.Base, "projects", "app")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "ORIGINAL-MARK"), []byte("x"), 0o644))
	var swapped []error
	s.p.AfterOpen(s.b, func() {
		swapped = append(swapped,
			os.Rename(l.Group, l.Group+".moved"), os.Symlink(l.Other, l.Group),
			os.Rename(proj, proj+".moved"), os.Symlink("/", proj))
	})
	defer s.p.AfterOpen(s.b, nil)
	spec := l.Spec()
	spec.Extra = []sandbox.Mount{{HostPath: proj, Name: "app", ReadOnly: true}}
	o := s.sh(t, spec, "echo /workspace/extra/app/* /workspace/group/*")
	require.NoError(t, o.Err)
	require.Len(t, swapped, 4, "the backend ran the hook")
	for _, err := range swapped {
		require.NoError(t, err)
	}
	assert.Equal(t, "/workspace/extra/app/ORIGINAL-MARK /workspace/group/ORIGINAL\n", o.Stdout)

	s.p.AfterOpen(s.b, nil)
	o = s.sh(t, spec, "echo /workspace/group/*")
	require.Error(t, o.Err)
	assert.Contains(t, o.Err.Error(), "symlinks are not followed")
	assert.Empty(t, o.Stdout)
}
