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

func TestOrphanInit(t *testing.T) {
	proc := t.TempDir()
	put := func(pid, name, ppid, uid, nspid string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		status := "Name:\t" + name + "\nState:\tS (sleeping)\nPPid:\t" + ppid + "\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\nNSpid:\t" + nspid + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "status"), []byte(status), 0o644))
	}
	put("1", "init", "0", "0", "1")
	put("50", "clawpen", "1", "0", "50")
	put("60", "bwrap", "50", "999", "60")
	put("61", "bwrap", "60", "999", "61\t1")   // a live sandbox's init
	put("71", "bwrap", "1", "999", "71\t1")    // its bwrap died with the host
	put("81", "bwrap", "50", "999", "81\t1")   // reparented to a subreaper
	put("91", "bwrap", "1", "1000", "91\t1")   // another user's
	put("92", "sleep", "1", "999", "92\t1")    // not bwrap
	put("93", "bwrap", "1", "999", "93\t2")    // not an init
	put("94", "bwrap", "1", "999", "94")       // no namespace of its own
	put("95", "bwrap", "4242", "999", "95\t1") // its parent is gone
	for pid, want := range map[string]bool{"61": false, "71": true, "81": true, "91": false, "92": false, "93": false, "94": false, "95": true, "60": false, "404": false} {
		assert.Equal(t, want, orphanInit(proc, pid, 999), "pid %s", pid)
	}
}

// TestKillOrphans makes a real orphan: a host (this test binary, run again)
// starts a sandbox and dies while the sandbox waits for its limits. bwrap
// reads EOF where it waited for the release and runs its command, outside
// any cgroup (here a sleep; the agent would find no job and exit, but an
// init has been seen to linger). KillOrphans, run by the next host, ends it.
func TestKillOrphans(t *testing.T) {
	if os.Getenv("CLAWPEN_ORPHAN_HOST") == "1" {
		orphanHost(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("orphans are only killed for a root host's dedicated sandbox user")
	}
	requireBwrap(t)
	uid, _ := runAs()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillOrphans$", "-test.v")
	cmd.Env = append(os.Environ(), "CLAWPEN_ORPHAN_HOST=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	blocked := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "ORPHAN-HOST-BLOCKED") {
			blocked = true
			break
		}
	}
	require.True(t, blocked, "the child host never reached the sandbox's release")
	var inits []int
	for _, pid := range descendantsOf(t, cmd.Process.Pid) {
		if st, ok := readStatus(filepath.Join("/proc", strconv.Itoa(pid))); ok && st.name == "bwrap" && len(st.nspid) == 2 && st.nspid[1] == "1" {
			inits = append(inits, pid)
		}
	}
	require.Len(t, inits, 1, "one sandbox init under the child host")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	init := inits[0]
	require.Eventually(t, func() bool { return orphanInit("/proc", strconv.Itoa(init), uid) }, 10*time.Second, 10*time.Millisecond,
		"the init outlives its host, as an orphan")
	n, err := killOrphanInits("/proc", uid)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	require.Eventually(t, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", init))
		return err != nil || strings.Contains(string(st), ") Z ")
	}, 10*time.Second, 10*time.Millisecond, "the orphaned init is gone")
}

// orphanHost is the child: it starts a sandbox whose release never comes.
func orphanHost(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Command = []string{"/bin/sleep", "300"} })
	f.b.beforeRelease = func() error {
		fmt.Println("ORPHAN-HOST-BLOCKED")
		select {}
	}
	_, _ = f.b.Run(context.Background(), f.spec())
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
