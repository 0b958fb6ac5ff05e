package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

const budgetProfiles = `{"profiles": {"small": {"daily_tokens": 1000}}}`

// A group over its profile's daily token budget: the run whose model call
// crosses it ends (the real agent, in a real sandbox, does not retry the
// proxy's 429); later triggers that day start no sandbox and call no
// provider; the chat and the owner are told once, also across a restart;
// /usage and `clawpen usage` show the use; the next day (the host's usage
// clock moved by the test knob, not slept) the group is answered again.
func TestBudgetRefusesAndTellsOnce(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Profiles: budgetProfiles})
	h.RegisterGroup(t, "family")
	h.CLI("groups", "profile", "family", "small")
	say := func(text string) {
		h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+text)
	}

	say("USAGE 300 200 REPLY first answer")
	assert.Equal(t, "first answer", h.Replies(harness.GroupChat, 1)[0])
	require.Len(t, h.LLM.Requests(), 1)

	// 500 used: this run starts; its first call brings the day to 1200, its
	// second (after the tool) is refused by the proxy without a provider call.
	say(`TOOL bash {"command":"true"} USAGE 400 300 REPLY never sent`)
	notice := h.Replies(harness.GroupChat, 2)[1]
	assert.Contains(t, notice, "daily token budget is used up, so I answer again tomorrow")
	h.WaitFor(harness.OwnerID, "Group family used its daily token budget of 1000 tokens (profile small)")
	require.Len(t, h.LLM.Requests(), 2, "the refused call never reached the provider, nor did a retry")

	// One at a time: triggers waiting together make one refused run.
	say("third")
	waitLogCount(t, h, "run refused: daily token budget reached", 2)
	say("fourth")
	waitLogCount(t, h, "run refused: daily token budget reached", 3)
	assert.Len(t, h.LLM.Requests(), 2, "refused before any sandbox or provider call")
	assert.Len(t, h.TG.SentTo(harness.GroupChat), 2, "told once")
	assert.Equal(t, 1, countContaining(harness.Texts(h.TG.SentTo(harness.OwnerID)), "used its daily token budget"), "the owner told once")

	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/usage")
	usage := harness.Plain(h.Replies(harness.OwnerID, n+1)[n])
	assert.Contains(t, usage, "family — budget 1,000 tokens a day (profile small)")
	assert.Contains(t, usage, ": 1,200 tokens (700 in, 500 out; 2 answers) on claude-test — budget reached")
	cli := h.CLI("usage", "--days", "2")
	assert.Contains(t, cli, "family — budget 1,000 tokens a day (profile small)")
	assert.Contains(t, cli, ": 1,200 tokens (700 in, 500 out; 2 answers) on claude-test — budget reached")

	audit := h.AuditLog()
	assert.Contains(t, audit, "family proxy.messages deny daily token budget of 1000 reached")
	assert.Contains(t, audit, "family agent.run deny daily token budget of 1000 reached; no sandbox started")

	// A restart does not tell the chat again.
	h.Stop()
	h.Start()
	say("fifth")
	waitLogCount(t, h, "run refused: daily token budget reached", 1)
	assert.Len(t, h.TG.SentTo(harness.GroupChat), 2, "not told again after a restart")
	assert.Len(t, h.LLM.Requests(), 2)

	// Tomorrow it runs again.
	h.Stop()
	h.Env = append(h.Env, "CLAWPEN_CLOCK_OFFSET=24h")
	h.Start()
	say("REPLY a new day")
	assert.Equal(t, "a new day", h.Replies(harness.GroupChat, 3)[2])
	assert.Len(t, h.LLM.Requests(), 3)
}

// setProfile gives a group its profile in the host's database, as `clawpen
// groups profile` does.
// waitLogCount waits until the host's log holds substr n times.
func waitLogCount(t *testing.T, h *harness.Host, substr string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(h.Stderr.String(), substr) >= n }, harness.Wait, 20*time.Millisecond,
		"the host never logged %q %d times; log:\n%s", substr, n, h.Stderr.String())
	assert.Equal(t, n, strings.Count(h.Stderr.String(), substr))
}

func countContaining(texts []string, substr string) int {
	n := 0
	for _, s := range texts {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}
