package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

func TestCommandsRegisteredAndOwnerOnly(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.OwnerSays("/help") // answered once the menu is set
	h.Replies(harness.OwnerID, 1)
	var names []string
	for _, c := range h.TG.CommandsFor(fmt.Sprintf("chat:%d", harness.OwnerID)) {
		names = append(names, c.Command)
	}
	assert.Empty(t, h.TG.Commands(), "no chat but the owner's has the admin commands")
	for _, want := range []string{"groups", "register", "unregister", "tasks", "schedule", "pause", "resume", "cancel", "status", "help", "profile"} {
		assert.Contains(t, names, want)
	}
	h.RegisterGroup(t, "family")

	// A member's command in a group is not executed and gets nothing.
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "/unregister family")
	// Nor one that calls the assistant: dropped, not kept, not answered.
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "/register 1 x @Andy ADMIN-CMD-MARKER")
	// A stranger's in private neither.
	h.Say(harness.StrangerID, "private", "", harness.StrangerID, "/groups")
	h.OwnerSays("/groups")
	got := h.Replies(harness.OwnerID, 3)
	assert.Contains(t, got[2], "family", "still registered")
	assert.Empty(t, h.TG.SentTo(harness.GroupChat))
	assert.Empty(t, h.TG.SentTo(harness.StrangerID))

	h.OwnerSays("/status")
	got = h.Replies(harness.OwnerID, 4)
	assert.Contains(t, got[3], "Sandbox: "+harness.Backend())
	h.OwnerSays("/help")
	got = h.Replies(harness.OwnerID, 5)
	assert.Contains(t, got[4], "/schedule")

	h.OwnerSays("/unregister family")
	got = h.Replies(harness.OwnerID, 6)
	assert.Contains(t, got[5], "Unregistered family")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy anyone?")
	h.OwnerSays("ping")
	h.Replies(harness.OwnerID, 7)
	assert.Empty(t, h.TG.SentTo(harness.GroupChat), "an unregistered group gets no answer")

	h.Stop()
	assert.Empty(t, h.GrepStored("ADMIN-CMD-MARKER"), "a member's admin command is not kept")
	audit := h.AuditLog()
	assert.Contains(t, audit, "family command deny")
	assert.Contains(t, audit, "telegram.private deny")
}

func TestSenderPolicy(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	const allowed, other = int64(7001), int64(7002)
	out := h.CLI("groups", "policy", "family", `{"allow":[7001],"mode":"trigger"}`)
	require.Contains(t, out, "set")

	h.Say(harness.GroupChat, "supergroup", "Family Chat", other, "@Andy OTHER-CALLS")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", allowed, "@Andy ALLOWED-CALLS")
	got := h.Replies(harness.GroupChat, 1)
	assert.Contains(t, got[0], "ALLOWED-CALLS")
	assert.Contains(t, got[0], "OTHER-CALLS", "mode trigger keeps others' messages as context")

	h.CLI("groups", "policy", "family", `{"allow":[7001],"mode":"drop"}`)
	h.Say(harness.GroupChat, "supergroup", "Family Chat", other, "@Andy DROPPED-TEXT")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", allowed, "@Andy SECOND")
	got = h.Replies(harness.GroupChat, 2)
	assert.Contains(t, got[1], "SECOND")
	assert.NotContains(t, got[1], "DROPPED-TEXT")
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, h.TG.SentTo(harness.GroupChat), 2, "the other member never triggers")

	// A malformed policy is refused by the CLI.
	cmd := h.CLIFails("groups", "policy", "family", `{"allow":"everyone"}`)
	assert.True(t, strings.Contains(cmd, "allow"), cmd)
}
