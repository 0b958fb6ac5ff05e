package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/faketg"
)

func TestForumTopicReplyStaysInTopic(t *testing.T) {
	h := newHost(t, options{owner: true})
	registerGroup(t, h, "family")
	h.say(groupChat, "supergroup", "Family Chat", memberID, "@Andy in the topic", faketg.InThread(77))
	sent, err := h.tg.WaitSent(ctxT(t), groupChat, 1)
	require.NoError(t, err)
	assert.Equal(t, 77, sent[0].ThreadID)
	assert.Contains(t, plain(sent[0].Text), "in the topic")

	// Outside forums Telegram sets a thread id on replies too; answers then
	// go to the chat itself, not to a thread that does not exist.
	h.say(groupChat, "supergroup", "Family Chat", memberID, "@Andy plain reply", faketg.ReplyToBot())
	sent, err = h.tg.WaitSent(ctxT(t), groupChat, 2)
	require.NoError(t, err)
	assert.Equal(t, 0, sent[1].ThreadID)
}

func TestSupergroupMigrationRekeysGroup(t *testing.T) {
	const newChat = int64(-1009998887)
	h := newHost(t, options{owner: true})
	registerGroup(t, h, "family")
	h.say(groupChat, "group", "Family Chat", memberID, "before the upgrade")
	// Telegram's service message in the old group announces the new id.
	h.say(groupChat, "group", "Family Chat", memberID, "", faketg.MigrateTo(newChat))
	h.say(newChat, "supergroup", "Family Chat", memberID, "@Andy after the upgrade")
	got := h.replies(newChat, 1)
	assert.Contains(t, got[0], "after the upgrade")
	assert.Contains(t, got[0], "before the upgrade", "the history moved with the group")
	assert.Empty(t, h.tg.SentTo(groupChat))
	assert.Contains(t, h.cli("groups", "list"), "-1009998887")
}

func TestMigrationDiscoveredOnSend(t *testing.T) {
	const newChat = int64(-1007776665)
	h := newHost(t, options{owner: true})
	registerGroup(t, h, "family")
	// The group was upgraded but its last message still came from the old id;
	// Telegram refuses the answer there and names the new id.
	h.tg.MigrateChat(groupChat, newChat)
	h.say(groupChat, "group", "Family Chat", memberID, "@Andy where do you answer?")
	got := h.replies(newChat, 1)
	assert.Contains(t, got[0], "where do you answer?")
	assert.Contains(t, h.cli("groups", "list"), "-1007776665")
}
