package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/test/harness"
)

// A host killed while a sandbox waits for its limits on --block-fd (as the
// warm sandbox made after each run does, briefly) leaves nothing behind:
// the sandbox was inside its cgroup from its start, and every process of it
// dies with the host, though its pipes are held open elsewhere (here by the
// test), so that nothing it could read or write ends it. Before, its
// namespace init outlived the host outside any cgroup, read EOF on
// --block-fd and ran the agent, which waited for a job for ever.
//
// The moment is made, not waited for: the test stops the host (SIGSTOP) as
// soon as it starts a sandbox's bwrap, checks that the sandbox's init then
// waits on --block-fd, unreleased, and kills the host (SIGKILL).
func TestSandboxWaitingForItsLimitsDiesWithItsHost(t *testing.T) {
	if harness.Backend() == "docker" {
		t.Skip("bwrap's --block-fd; a Docker sandbox does not die with its host, it is removed at the next start (TestWarmSandboxesGoneAfterCrash)")
	}
	if harness.Backend() == "gvisor" {
		t.Skip("bwrap's --block-fd; a gVisor sandbox waits for no release (runsc sets its own limits), and is removed at the next start (TestWarmSandboxesGoneAfterCrash)")
	}
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy hello")
	h.Replies(harness.GroupChat, 1)
	h.WaitLog(`msg="warm sandbox ready" group=family`)

	host := h.PID()
	var outer, init int
	for attempt := 1; init == 0; attempt++ {
		require.LessOrEqual(t, attempt, 20, "never caught a sandbox before its release")
		before := childBwraps(host)
		// The run takes the warm sandbox; the pool starts the next one as
		// soon as it has ended.
		h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, fmt.Sprintf("@Andy again %d", attempt))
		deadline := time.Now().Add(harness.Wait)
		for outer == 0 && time.Now().Before(deadline) {
			for b := range childBwraps(host) {
				if !before[b] {
					require.NoError(t, syscall.Kill(host, syscall.SIGSTOP))
					outer = b
					break
				}
			}
		}
		require.NotZero(t, outer, "no new sandbox after run %d", attempt)
		init = waitingInit(t, outer)
		if init == 0 { // released before the host stopped: try the next one
			require.NoError(t, syscall.Kill(host, syscall.SIGCONT))
			outer = 0
		}
	}
	t.Logf("caught the sandbox of bwrap %d waiting on --block-fd", outer)
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", init))
	require.NoError(t, err)
	memory := ""
	for _, l := range strings.Split(string(cg), "\n") {
		if strings.Contains(l, ":memory:") {
			memory = strings.SplitN(l, ":", 3)[2]
		}
	}
	assert.Contains(t, memory, "/sb-", "the waiting sandbox is in its own cgroup already")

	// Its stdin and stdout stay open elsewhere: only its host's death may end it.
	stdin, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/0", init), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := os.Open(fmt.Sprintf("/proc/%d/fd/1", init))
	require.NoError(t, err)
	defer stdout.Close()
	sandbox := []proc{procOf(t, outer), procOf(t, init)}

	h.Crash()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var alive []string
		for _, p := range sandbox {
			if p.alive() {
				alive = append(alive, p.String())
			}
		}
		for _, p := range sandbox {
			for _, c := range descendants(p.pid) {
				alive = append(alive, c.String()) // what the init started
			}
		}
		if len(alive) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "15 s after its host died, the sandbox lives: %v", alive)
		time.Sleep(20 * time.Millisecond)
	}
	if memory != "" {
		procs, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", memory, "cgroup.procs"))
		if err == nil {
			assert.Empty(t, strings.TrimSpace(string(procs)), "nothing is left in the sandbox's cgroup")
		}
	}
	// The next host clears the crashed one's cgroups and serves.
	h.Start()
	h.OwnerSays("after the crash")
	h.WaitFor(harness.OwnerID, "after the crash")
}

// childBwraps are the living bwrap processes the host started.
func childBwraps(host int) map[int]bool {
	out := map[int]bool{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", host))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", host, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			if comm, state, _, ok := procStat(f); ok && comm == "bwrap" && state != "Z" {
				pid, _ := strconv.Atoi(f)
				out[pid] = true
			}
		}
	}
	return out
}

// waitingInit waits for the namespace init of the sandbox whose bwrap is
// outer to block reading --block-fd with nothing there yet, and returns
// it; 0 when the init forked its command instead (it was released).
func waitingInit(t *testing.T, outer int) int {
	t.Helper()
	deadline := time.Now().Add(harness.Wait)
	var seen string
	for time.Now().Before(deadline) {
		kids := descendants(outer)
		seen = fmt.Sprint(kids)
		for _, k := range kids {
			if k.ppid != outer {
				return 0 // the init forked: released
			}
		}
		if len(kids) == 1 {
			init := kids[0].pid
			sys, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", init))
			f := strings.Fields(string(sys))
			seen += " " + string(sys)
			// read(2) is syscall 0 on amd64; its first argument the fd.
			if len(f) > 1 && f[0] == "0" && blockFdEmpty(init, f[1]) {
				return init
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the sandbox of bwrap %d never waited on --block-fd: %s", outer, seen)
	return 0
}

// blockFdEmpty reports whether the pipe at the init's fd (hex, as
// /proc/<pid>/syscall shows it) holds nothing to read.
func blockFdEmpty(init int, fdHex string) bool {
	fd, err := strconv.ParseInt(strings.TrimPrefix(fdHex, "0x"), 16, 64)
	if err != nil {
		return false
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%d", init, fd))
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	return err == nil && n == 0
}

// proc names one process across pid reuse.
type proc struct {
	pid, ppid int
	start     string
	comm      string
}

func (p proc) String() string { return fmt.Sprintf("%d (%s)", p.pid, p.comm) }

// alive reports whether the process still runs (a zombie runs nothing).
func (p proc) alive() bool {
	q, ok := readProc(p.pid)
	return ok && q.start == p.start && q.state != "Z"
}

func procOf(t *testing.T, pid int) proc {
	t.Helper()
	p, ok := readProc(pid)
	require.True(t, ok, "process %d", pid)
	return p.proc
}

type procState struct {
	proc
	state string
}

// readProc reads /proc/<pid>/stat.
func readProc(pid int) (procState, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procState{}, false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return procState{}, false
	}
	f := strings.Fields(s[j+1:])
	if len(f) < 20 {
		return procState{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procState{proc{pid: pid, ppid: ppid, start: f[19], comm: s[i+1 : j]}, f[0]}, true
}

// descendants are the living processes under pid.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	all := map[int]procState{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(n); ok && p.state != "Z" {
			all[n] = p
		}
	}
	var out []proc
	for _, p := range all {
		for q, hops := p.ppid, 0; q > 1 && hops < 64; q, hops = all[q].ppid, hops+1 {
			if q == pid {
				out = append(out, p.proc)
				break
			}
			if _, ok := all[q]; !ok {
				break
			}
		}
	}
	return out
}
