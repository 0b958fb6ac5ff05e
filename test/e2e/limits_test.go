package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// A run that reaches one of its sandbox's limits is told, in the host's
// words, which limit and how large (from the kernel's counters, the
// engine's state or the host's disk watcher, never from what the sandbox
// wrote), and counted in the metrics and in /status. Each limit is reached
// through a real sandbox: a memory hog that makes the agent the OOM
// killer's choice, a fork bomb after which the agent is gone, a file past
// the group's disk quota.
func TestRunAtItsLimitSaysWhich(t *testing.T) {
	addr := freeLoopbackAddr(t)
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_METRICS_ADDR": addr},
		Profiles: `{"profiles":{"tight":{"memory_mb":64,"pids":48,"disk_mb":16}}}`})
	h.RegisterGroup(t, "family")
	h.OwnerSays("/profile family tight")
	h.WaitFor(harness.OwnerID, "family now runs with the profile tight")

	bash := func(cmd string) string { return fmt.Sprintf("@Andy TOOL bash {%q:%q}", "command", cmd) }
	for _, tc := range []struct {
		name, msg, notice, outcome string
		runs                       int // a failed run is tried three times (CLAWPEN_RETRY_BACKOFF); the disk quota is not retried
	}{
		{"memory", bash("echo 1000 > /proc/$PPID/oom_score_adj; tail /dev/zero"),
			"Sorry, I could not answer: it was stopped at its memory limit of 64 MiB.", "oom", 3},
		// dash gives up at the first refused fork (bash would retry it);
		// the agent ends with the bomb, as one that took its threads would,
		// half a second later (a builtin read, no fork): Docker's watch
		// reads the cgroup's count every 100 ms and misses a container gone
		// sooner (see docker/limits.go).
		{"processes", bash("mkfifo /tmp/w; exec 3<>/tmp/w; sh -c 'while :; do sleep 600 & done' 2>/dev/null; read -t 0.5 x <&3; kill -9 $PPID"),
			"Sorry, I could not answer: it reached its process limit of 48 processes.", "pids_limit", 3},
		{"disk", bash("head -c 40000000 /dev/zero > /workspace/group/fill; sleep 60"),
			"Sorry, I could not answer: it was stopped at its disk quota of 16 MiB.", "disk_limit", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.For(t)
			h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, tc.msg)
			h.WaitFor(harness.GroupChat, tc.notice)
			_, body := get(t, addr, "/metrics")
			assert.Equal(t, float64(tc.runs), sample(body, fmt.Sprintf(`clawpen_agent_runs_total{backend=%q,outcome=%q}`, harness.Backend(), tc.outcome)))
		})
	}
	for _, s := range harness.Texts(h.TG.SentTo(harness.GroupChat)) {
		assert.NotContains(t, s, "exited with code", "the limit is named, not its symptom")
	}
	require.NoError(t, os.Remove(filepath.Join(h.Dir, "groups", "family", "fill")))

	// The owner's notice of the last failure comes after the group's.
	h.WaitFor(harness.OwnerID, "it was stopped at its disk quota")
	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/status")
	status := h.Replies(harness.OwnerID, n+1)[n]
	assert.Contains(t, status, "Runs that reached a sandbox limit since the start: 3 at memory (last: family), 3 at processes (last: family) and 1 at disk (last: family).")
	owner := strings.Join(harness.Texts(h.TG.SentTo(harness.OwnerID)), "\n")
	assert.Contains(t, owner, "The agent of group family failed after retries: it was stopped at its memory limit of 64 MiB")
}

// A profile's process limit is the agent's: under it the agent holds 20
// processes at once and answers. On gVisor the sandbox's cgroup on the host
// also counts runsc's own threads (the Sentry's, a stub per process); a
// limit that left them no room ended the sandbox before the agent ran.
func TestProcessLimitLeavesTheAgentItsProcesses(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Profiles: `{"profiles":{"few":{"pids":48}}}`})
	h.RegisterGroup(t, "family")
	h.OwnerSays("/profile family few")
	h.WaitFor(harness.OwnerID, "family now runs with the profile few")
	cmd := `p=""; for i in $(seq 20); do sleep 120 & p="$p $!"; done; n=0; for q in $p; do kill -0 $q && n=$((n+1)); done; echo HELD=$n; kill $p`
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, fmt.Sprintf("@Andy TOOL bash {%q:%q}", "command", cmd))
	got := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, got, "HELD=20", "all 20 processes alive at once")
	assert.NotContains(t, got, "process limit")
}
