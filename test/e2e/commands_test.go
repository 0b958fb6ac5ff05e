package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCommandsRegisteredAndOwnerOnly(t *testing.T) {
	h := newHost(t, options{owner: true})
	var names []string
	for _, c := range h.tg.Commands() {
		names = append(names, c.Command)
	}
	for _, want := range []string{"groups", "register", "unregister", "tasks", "schedule", "pause", "resume", "cancel", "status", "help"} {
		assert.Contains(t, names, want)
	}
	registerGroup(t, h, "family")

	// A member's command in a group is not executed and gets nothing.
	h.say(groupChat, "supergroup", "Family Chat", memberID, "/unregister family")
	// A stranger's in private neither.
	h.say(strangerID, "private", "", strangerID, "/groups")
	h.ownerSays("/groups")
	got := h.replies(ownerID, 2)
	assert.Contains(t, got[1], "family", "still registered")
	assert.Empty(t, h.tg.SentTo(groupChat))
	assert.Empty(t, h.tg.SentTo(strangerID))

	h.ownerSays("/status")
	got = h.replies(ownerID, 3)
	assert.Contains(t, got[2], "Sandbox: "+backend)
	h.ownerSays("/help")
	got = h.replies(ownerID, 4)
	assert.Contains(t, got[3], "/schedule")

	h.ownerSays("/unregister family")
	got = h.replies(ownerID, 5)
	assert.Contains(t, got[4], "Unregistered family")
	h.say(groupChat, "supergroup", "Family Chat", memberID, "@Andy anyone?")
	h.ownerSays("ping")
	h.replies(ownerID, 6)
	assert.Empty(t, h.tg.SentTo(groupChat), "an unregistered group gets no answer")

	h.stop()
	audit := h.auditLog()
	assert.Contains(t, audit, "family command deny")
	assert.Contains(t, audit, "telegram.private deny")
}

func TestSenderPolicy(t *testing.T) {
	h := newHost(t, options{owner: true})
	registerGroup(t, h, "family")
	const allowed, other = int64(7001), int64(7002)
	out := h.cli("groups", "policy", "family", `{"allow":[7001],"mode":"trigger"}`)
	require.Contains(t, out, "set")

	h.say(groupChat, "supergroup", "Family Chat", other, "@Andy OTHER-CALLS")
	h.say(groupChat, "supergroup", "Family Chat", allowed, "@Andy ALLOWED-CALLS")
	got := h.replies(groupChat, 1)
	assert.Contains(t, got[0], "ALLOWED-CALLS")
	assert.Contains(t, got[0], "OTHER-CALLS", "mode trigger keeps others' messages as context")

	h.cli("groups", "policy", "family", `{"allow":[7001],"mode":"drop"}`)
	h.say(groupChat, "supergroup", "Family Chat", other, "@Andy DROPPED-TEXT")
	h.say(groupChat, "supergroup", "Family Chat", allowed, "@Andy SECOND")
	got = h.replies(groupChat, 2)
	assert.Contains(t, got[1], "SECOND")
	assert.NotContains(t, got[1], "DROPPED-TEXT")
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, h.tg.SentTo(groupChat), 2, "the other member never triggers")

	// A malformed policy is refused by the CLI.
	cmd := h.cliFails("groups", "policy", "family", `{"allow":"everyone"}`)
	assert.True(t, strings.Contains(cmd, "allow"), cmd)
}
