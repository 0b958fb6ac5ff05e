package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

func TestForumTopicReplyStaysInTopic(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy in the topic", faketg.InThread(77))
	sent, err := h.TG.WaitSent(harness.Ctx(t), harness.GroupChat, 1)
	require.NoError(t, err)
	assert.Equal(t, 77, sent[0].ThreadID)
	assert.Contains(t, harness.Plain(sent[0].Text), "in the topic")

	// Outside forums Telegram sets a thread id on replies too; answers then
	// go to the chat itself, not to a thread that does not exist.
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy plain reply", faketg.ReplyToBot())
	sent, err = h.TG.WaitSent(harness.Ctx(t), harness.GroupChat, 2)
	require.NoError(t, err)
	assert.Equal(t, 0, sent[1].ThreadID)
}

func TestSupergroupMigrationRekeysGroup(t *testing.T) {
	const newChat = int64(-1009998887)
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	h.Say(harness.GroupChat, "group", "Family Chat", harness.MemberID, "before the upgrade")
	// Telegram's service message in the old group announces the new id.
	h.Say(harness.GroupChat, "group", "Family Chat", harness.MemberID, "", faketg.MigrateTo(newChat))
	h.Say(newChat, "supergroup", "Family Chat", harness.MemberID, "@Andy after the upgrade")
	got := h.Replies(newChat, 1)
	assert.Contains(t, got[0], "after the upgrade")
	assert.Contains(t, got[0], "before the upgrade", "the history moved with the group")
	assert.Empty(t, h.TG.SentTo(harness.GroupChat))
	assert.Contains(t, h.CLI("groups", "list"), "-1009998887")
}

func TestMigrationDiscoveredOnSend(t *testing.T) {
	const newChat = int64(-1007776665)
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	// The group was upgraded but its last message still came from the old id;
	// Telegram refuses the answer there and names the new id.
	h.TG.MigrateChat(harness.GroupChat, newChat)
	h.Say(harness.GroupChat, "group", "Family Chat", harness.MemberID, "@Andy where do you answer?")
	got := h.Replies(newChat, 1)
	assert.Contains(t, got[0], "where do you answer?")
	assert.Contains(t, h.CLI("groups", "list"), "-1007776665")
}
