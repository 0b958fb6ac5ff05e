package bwrap

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host (this test binary, run again) starts a sandbox and is killed while
// the sandbox waits for its limits on --block-fd. The sandbox was born in
// its cgroup, its command (which would leave a mark in the group's folder
// and sleep) never runs, and every process of it is gone with its host:
// nobody is left to clean up after it. Before, bwrap's namespace init waited
// outside any cgroup, outlived the host, and ran the command on EOF.
func TestSandboxDiesWithItsHost(t *testing.T) {
	if os.Getenv("CLAWPEN_DYING_HOST") == "1" {
		dyingHost(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("sandbox cgroups need root here (cgroup v1)")
	}
	requireBwrap(t)
	name := "clawpen-test-dying-" + randomHex(4)
	t.Cleanup(func() {
		// The dead host's cgroups: a host of the same name removes them.
		m, err := OpenCgroups(CgroupConfig{Name: name})
		if assert.NoError(t, err) {
			assert.NoError(t, m.Close())
		}
	})
	cmd := exec.Command(os.Args[0], "-test.run=^TestSandboxDiesWithItsHost$", "-test.v")
	cmd.Env = append(os.Environ(), "CLAWPEN_DYING_HOST=1", "CLAWPEN_DYING_CGROUP="+name)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var base string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if b, ok := strings.CutPrefix(sc.Text(), "DYING-HOST-BLOCKED "); ok {
			base = b
			break
		}
	}
	require.NotEmpty(t, base, "the child host never reached the sandbox's release")
	t.Cleanup(func() { _ = os.RemoveAll(base) })

	type proc struct {
		pid   int
		start string
	}
	var sandbox []proc
	init := 0
	for _, pid := range descendantsOf(t, cmd.Process.Pid) {
		st, ok := readStatus(filepath.Join("/proc", strconv.Itoa(pid)))
		require.True(t, ok)
		start, ok := startTime(pid)
		require.True(t, ok)
		sandbox = append(sandbox, proc{pid, start})
		if parent, ok := readStatus(filepath.Join("/proc", strconv.Itoa(st.ppid))); ok && st.name == "bwrap" && parent.name == "bwrap" {
			init = pid
		}
	}
	require.NotZero(t, init, "bwrap's namespace init under the child host: %v", sandbox)
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", init))
	require.NoError(t, err)
	assert.Contains(t, string(cg), "/"+name+"/sb-", "the init waits for its limits inside the sandbox's cgroup")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		for _, p := range sandbox {
			if s, ok := startTime(p.pid); ok && s == p.start && !zombie(p.pid) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every process of the sandbox dies with its host")
	assert.NoFileExists(t, filepath.Join(base, "groups", "team", "RAN"), "the command never ran")
}

// dyingHost is the child: it starts a sandbox whose release never comes.
func dyingHost(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.CgroupName = os.Getenv("CLAWPEN_DYING_CGROUP")
		c.Command = []string{"/bin/sh", "-c", "echo RAN > /workspace/group/RAN; exec sleep 300"}
	})
	f.b.beforeRelease = func() error {
		fmt.Println("DYING-HOST-BLOCKED " + f.Base)
		select {}
	}
	res, err := f.b.Run(context.Background(), f.spec())
	t.Fatalf("the sandbox ended before its release: %+v, %v", res, err)
}

// startTime is field 22 of /proc/<pid>/stat: with the pid, it names one
// process across pid reuse.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && strings.Contains(string(b), ") Z ")
}

// descendantsOf lists the pids under pid.
func descendantsOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStatus(filepath.Join("/proc", e.Name())); ok {
			parent[p] = st.ppid
		}
	}
	var out []int
	for p := range parent {
		for q, n := parent[p], 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

type procStatus struct {
	name string
	ppid int
}

// readStatus reads a process's name and parent from /proc/<pid>/status.
func readStatus(dir string) (procStatus, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return procStatus{}, false
	}
	st := procStatus{ppid: -1}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k {
		case "Name":
			st.name = strings.TrimSpace(v)
		case "PPid":
			st.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return st, st.name != ""
}
