package e2e

import (
	"strings"
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

// A sticker holds nothing for the agent: it starts no run, is not kept as
// context, and in main the owner is told what does reach the assistant.
// (A photo or file without caption is a message: files_test.go.)
func TestTextlessMessagesStartNoRun(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family") // the owner's first reply

	// In a group, a bare sticker answering the bot would call it; it must not.
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "", faketg.Sticker(), faketg.ReplyToBot())
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy ping")
	group := h.Replies(harness.GroupChat, 1)
	assert.Contains(t, group[0], "ping")

	h.Say(harness.OwnerID, "private", "", harness.OwnerID, "", faketg.Sticker())
	h.OwnerSays("only this")
	got := h.Replies(harness.OwnerID, 3)
	assert.Contains(t, got[1], "I cannot take in this sticker")
	assert.Contains(t, got[2], "only this")

	// One run each for the two texts, each over its one message: nothing
	// else reached the model.
	reqs := h.LLM.Requests()
	require.Len(t, reqs, 2, "one model request per text message")
	for _, r := range reqs {
		assert.Equal(t, 1, strings.Count(harness.PromptOf(r), "<message "), "one message per run:\n%s", harness.PromptOf(r))
	}
	assert.Contains(t, harness.PromptOf(reqs[0]), "ping")
	assert.Contains(t, harness.PromptOf(reqs[1]), "only this")
	assert.Len(t, h.TG.SentTo(harness.GroupChat), 1, "the group got its one answer and nothing more")
	assert.Len(t, h.TG.SentTo(harness.OwnerID), 3, "the owner: registration, the notice, the answer")
}

// A Bot API that drops the host's first getMe calls (a restart during an
// outage) is waited for: the host starts once it answers and serves. Before,
// serve exited at the first dropped getMe (the full-size load test saw it).
func TestHostStartsOnceTelegramAnswers(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.Stop()
	h.TG.DropNextConnections(2)
	h.Start()
	assert.Contains(t, h.Stderr.String(), "Telegram does not answer; trying again")
	h.OwnerSays("after the outage")
	h.WaitFor(harness.OwnerID, "after the outage")
}
