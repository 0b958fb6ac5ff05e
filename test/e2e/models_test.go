package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// Two groups with different profile models: every request their runs make
// reaches the provider with the group's model, also one the sandbox sends
// itself naming another; /status, `clawpen profiles list` and /usage say
// which model each group runs on.
func TestProfileModelPerGroup(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Profiles: `{"profiles": {"cheap": {"model": "claude-haiku-test"}}}`})
	h.RegisterGroup(t, "family")
	h.CLI("groups", "profile", "family", "cheap")

	// The sandbox asks the proxy for a model of its own choosing.
	direct := `curl -s --unix-socket /run/clawpen/host.sock -H 'Content-Type: application/json' ` +
		`-d '{"model":"claude-opus-of-my-choice","max_tokens":50,"messages":[{"role":"user","content":"REPLY direct"}]}' http://clawpen/v1/messages; echo`
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+toolLine("bash", map[string]any{"command": direct}))
	got := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, got, "direct", "the sandbox's own request was answered")
	h.OwnerSays("REPLY from main")
	h.WaitFor(harness.OwnerID, "from main")

	reqs := h.LLM.Requests()
	require.Len(t, reqs, 4, "family: the agent twice and the sandbox's own request; main once")
	for _, r := range reqs[:3] {
		assert.Equal(t, "claude-haiku-test", r.Model, "family's requests carry its profile's model")
	}
	assert.Equal(t, "claude-test", reqs[3].Model, "main runs on the host's model")

	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/status")
	status := harness.Plain(h.Replies(harness.OwnerID, n+1)[n])
	assert.Contains(t, status, "Models: family on claude-haiku-test (profile cheap); main on claude-test (the host's).")
	assert.Regexp(t, `cheap\s.*\sclaude-haiku-test\s+yes\s+family`, h.CLI("profiles", "list"))

	h.OwnerSays("/usage")
	usage := harness.Plain(h.Replies(harness.OwnerID, n+2)[n+1])
	assert.Contains(t, usage, "3 answers) on claude-haiku-test", usage)
	assert.True(t, strings.Contains(usage, "1 answer) on claude-test"), usage)
}
