package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// sandboxStarts are the host's "sandbox start" lines so far: invocation id
// and whether a warm sandbox took the job.
func sandboxStarts(h *harness.Host) (invs []string, warm []bool) {
	re := regexp.MustCompile(`msg="sandbox start".* invocation=([0-9a-f]+) .*warm=(true|false)`)
	for _, m := range re.FindAllStringSubmatch(h.Stderr.String(), -1) {
		invs = append(invs, m[1])
		warm = append(warm, m[2] == "true")
	}
	return invs, warm
}

// A warm sandbox serves one job and is gone: each message after the first
// is handed to a sandbox started ahead for it (the host says so), a new one
// every time, and nothing the previous run left (files in /tmp, a process
// it started in the background, a variable it exported) is there.
func TestWarmSandboxServesOneJobAndKeepsNothing(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.OwnerSays("hello") // registers main; its next sandbox is made after this run
	h.WaitFor(harness.OwnerID, "hello")
	h.WaitLog(`msg="warm sandbox started" group=main`)

	probe := strings.Join([]string{
		"ls -A /tmp | grep -q . && echo TMP-HAS:$(ls -A /tmp | tr '\\n' ,) || echo TMP-EMPTY",
		// argv[0] only: this very command line names the sleeper too.
		"for c in /proc/[0-9]*/cmdline; do [ \"$(tr '\\0' '\\n' < $c 2>/dev/null | head -n 1)\" = LEFTOVER-SLEEPER ] && echo SLEEPER-ALIVE; done; echo SLEEPERS-CHECKED",
		"test -n \"$LEAKED\" && echo ENV-LEAKED || echo ENV-CLEAN",
		"echo secret-$RANDOM > /tmp/left-behind",
		"export LEAKED=1",
		"(setsid sh -c 'exec -a LEFTOVER-SLEEPER sleep 300' >/dev/null 2>&1 &)",
		"echo PROBE-DONE",
	}, "; ")
	for n := 1; n <= 3; n++ {
		h.OwnerSays(fmt.Sprintf("run %d TOOL bash {\"command\":%q}", n, probe))
		got := h.Replies(harness.OwnerID, n+1)[n]
		assert.Contains(t, got, "PROBE-DONE")
		for _, want := range []string{"TMP-EMPTY", "SLEEPERS-CHECKED", "ENV-CLEAN"} {
			assert.Contains(t, got, want, "run %d", n)
		}
		assert.NotContains(t, got, "SLEEPER-ALIVE", "run %d", n)
		h.WaitLogCount(`msg="warm sandbox started" group=main`, n+1) // the next one is ready
	}
	invs, warm := sandboxStarts(h)
	require.Len(t, invs, 4, "four runs")
	assert.Equal(t, []bool{false, true, true, true}, warm, "each run after the first was handed to a warm sandbox")
	slices.Sort(invs)
	assert.Len(t, slices.Compact(invs), 4, "every run had a sandbox of its own")
	h.OwnerSays("/status")
	h.WaitFor(harness.OwnerID, "Warm sandboxes: main (1 of up to 3)")
}

// A warm sandbox made before the group's profile changed is not used after
// it: the run sees the new view (here, the egress proxy its new profile
// gives), and the host says it dropped the stale one.
func TestWarmSandboxDroppedWhenViewChanges(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Profiles: `{"profiles":{"web":{"network":"allowlist","egress":["example.com"]}}}`})
	h.RegisterGroup(t, "family")
	probe := `@Andy TOOL bash {"command":"echo PROXY=${HTTPS_PROXY:-none}"}`
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, probe)
	assert.Contains(t, h.Replies(harness.GroupChat, 1)[0], "PROXY=none")
	h.WaitLog(`msg="warm sandbox started" group=family`)

	h.OwnerSays("/profile family web")
	h.WaitFor(harness.OwnerID, "family now runs with the profile web")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, probe)
	assert.Contains(t, h.Replies(harness.GroupChat, 2)[1], "PROXY=http://127.0.0.1:3128", "the new profile's view")
	h.WaitLog(`msg="warm sandbox dropped" group=family`)
	assert.Contains(t, h.Stderr.String(), `reason="its view changed"`)
	_, warm := sandboxStarts(h)
	require.NotEmpty(t, warm)
	assert.False(t, warm[len(warm)-1], "the stale warm sandbox did not take the job")
}

// A warm sandbox holds the extra mounts and masks of the moment it was made.
// A secret file put in a mounted folder after that, and a mount removed,
// make it stale: the run that follows gets a sandbox that masks the file
// and no longer has the mount.
func TestWarmSandboxDroppedWhenMountsChange(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, AllowedRoots: []harness.AllowedRoot{{Path: "projects"}}})
	h.RegisterGroup(t, "family")
	proj := filepath.Join(h.Outside, "projects", "app")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "README.md"), []byte("VISIBLE-README"), 0o644))
	h.CLI("groups", "mount", "add", "family", proj, "app")
	probe := `@Andy TOOL bash {"command":"cat /workspace/extra/app/README.md 2>/dev/null || echo NO-MOUNT; echo; echo env=[$(cat /workspace/extra/app/.env 2>/dev/null)]"}`
	say := func(n int) string {
		t.Helper()
		h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, probe)
		h.WaitLogCount(`msg="warm sandbox ready" group=family`, n)
		return h.Replies(harness.GroupChat, n)[n-1]
	}
	assert.Contains(t, say(1), "VISIBLE-README")

	// A secret appears in the mounted folder while the next sandbox waits.
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".env"), []byte("LATE-SECRET"), 0o644))
	got := say(2)
	assert.Contains(t, got, "VISIBLE-README")
	assert.Contains(t, got, "env=[]", "the file is masked")
	assert.NotContains(t, got, "LATE-SECRET")

	h.CLI("groups", "mount", "remove", "family", "app")
	got = say(3)
	assert.Contains(t, got, "NO-MOUNT")
	assert.NotContains(t, got, "VISIBLE-README")
	assert.Equal(t, 2, strings.Count(h.Stderr.String(), `msg="warm sandbox dropped" group=family`), "both stale sandboxes were dropped")
}

// With CLAWPEN_WARM=0 nothing is started ahead: every run is cold, as
// before warm sandboxes existed, and /status says the pool is off.
func TestWarmOffRunsCold(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_WARM": "0"}})
	for n := 1; n <= 2; n++ {
		h.OwnerSays(fmt.Sprintf("cold %d", n))
		h.WaitFor(harness.OwnerID, fmt.Sprintf("cold %d", n))
	}
	h.OwnerSays("/status")
	h.WaitFor(harness.OwnerID, "Warm sandboxes: off.")
	_, warm := sandboxStarts(h)
	assert.Equal(t, []bool{false, false}, warm)
	assert.NotContains(t, h.Stderr.String(), "warm sandbox started")
}

// A host killed while warm sandboxes wait, or while one is still being made
// (before its limits are set), leaves none behind once it is started again:
// Docker's and gVisor's are removed as orphans, bwrap's die with it or are
// killed at start.
func TestWarmSandboxesGoneAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name, wait string
	}{
		{"waiting", `msg="warm sandbox ready" group=family`},
		{"being made", `msg="warm sandbox started" group=family`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.New(t, harness.Options{Owner: true})
			h.RegisterGroup(t, "family")
			h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy hello")
			h.Replies(harness.GroupChat, 1)
			h.WaitLog(tc.wait)
			var before []string
			require.Eventually(t, func() bool { before = sandboxesNow(t, h, h.PID()); return len(before) > 0 },
				20*time.Second, time.Millisecond, "the warm sandbox is there")
			h.Crash()
			h.Stderr.Reset()
			h.Start()
			h.WaitLog(`msg="warm sandbox started" group=main`) // main's, made at start
			h.OwnerSays("after the crash")
			h.WaitFor(harness.OwnerID, "after the crash")
			after := sandboxesNow(t, h, 0)
			for _, id := range before {
				if harness.Backend() != "docker" {
					if _, state, _, ok := procStat(id); ok && state != "Z" {
						after = append(after, id)
					}
				}
				assert.NotContains(t, after, id, "a sandbox of the crashed host is still there")
			}
		})
	}
}

// procStat reads "pid (comm) state ppid ..." of a process.
func procStat(pid string) (comm, state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", "", 0, false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return "", "", 0, false
	}
	f := strings.Fields(s[j+1:])
	if len(f) < 2 {
		return "", "", 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return s[i+1 : j], f[0], ppid, true
}

// sandboxesNow lists the sandboxes that exist: Docker containers labelled
// by clawpen for h's data dir, or the processes of bwrap sandboxes: every
// clawpen-agent, or with hostPID the bwrap and clawpen-agent processes under
// it (zombies, which run nothing, left out).
func sandboxesNow(t *testing.T, h *harness.Host, hostPID int) []string {
	t.Helper()
	if harness.Backend() == "docker" {
		out, err := exec.Command("docker", "ps", "-a", "-q", "--no-trunc", "--filter", "label=clawpen.invocation",
			"--filter", "label=clawpen.instance="+filepath.Join(h.Dir, "data")).Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	if harness.Backend() == "gvisor" {
		return runscProcesses(t, filepath.Join(h.Dir, "data", "gvisor"))
	}
	under := func(pid string) bool {
		for range 32 {
			_, _, pp, ok := procStat(pid)
			if !ok || pp <= 1 {
				return false
			}
			if pp == hostPID {
				return true
			}
			pid = strconv.Itoa(pp)
		}
		return false
	}
	var pids []string
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		comm, state, _, ok := procStat(e.Name())
		if !ok || state == "Z" {
			continue
		}
		if comm == "clawpen-agent" && hostPID == 0 || (comm == "clawpen-agent" || comm == "bwrap") && hostPID != 0 && under(e.Name()) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// runscProcesses are the live runsc processes (run, sandbox, gofer) whose
// command line names state, a host's gVisor state dir: its sandboxes.
func runscProcesses(t *testing.T, state string) []string {
	t.Helper()
	var pids []string
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "runsc") || !strings.Contains(string(cmd), state) {
			continue
		}
		if _, st, _, ok := procStat(e.Name()); ok && st != "Z" {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
