package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// draftAnswer is what the fake model writes, slowly (DRIP: a pause between
// its 32-byte chunks), with a private part that no draft may show.
const draftAnswer = "Here is the answer, written slowly enough to be seen growing in the chat, " +
	"one chunk after another, until the whole of it has arrived and is sent as one message."

const draftPrompt = "DRIP 120ms REPLY <internal>PRIVATE-NOTES</internal>" + draftAnswer

// While a slow model writes, the owner sees several drafts, each longer
// than the last, none with the internal part, then the answer as exactly
// one message; a group gets "typing…" and no draft. Both providers.
func TestDraftsGrowThenOneAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts harness.Options
	}{
		{"anthropic", harness.Options{Owner: true}},
		{"openai", harness.Options{Owner: true, KeylessOpenAI: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.New(t, tc.opts)
			h.OwnerSays(draftPrompt)
			got := h.Replies(harness.OwnerID, 1)
			assert.Equal(t, draftAnswer, got[0])

			drafts := h.TG.Drafts(harness.OwnerID)
			require.GreaterOrEqual(t, len(drafts), 2, "several drafts; host log:\n%s", h.Stderr.String())
			answer := h.TG.SentTo(harness.OwnerID)[0]
			for i, d := range drafts {
				assert.NotContains(t, d.Visible, "PRIVATE")
				assert.True(t, strings.HasPrefix(draftAnswer, d.Visible), "draft %d %q is the answer's beginning", i, d.Visible)
				assert.False(t, d.Time.After(answer.Time), "draft %d came after the answer", i)
				assert.Equal(t, drafts[0].DraftID, d.DraftID, "one draft, updated")
				if i > 0 {
					assert.Greater(t, len(d.Visible), len(drafts[i-1].Visible), "each draft grows")
				}
			}

			// Exactly one message: the next answer is the second.
			h.OwnerSays("REPLY next")
			got = h.Replies(harness.OwnerID, 2)
			assert.Equal(t, []string{draftAnswer, "next"}, got)
			assert.Len(t, h.TG.SentTo(harness.OwnerID), 2)

			// A group: typing, and no draft (Telegram shows them in private chats only).
			h.RegisterGroup(t, "family")
			ownerDrafts := len(h.TG.Drafts(harness.OwnerID))
			h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+draftPrompt)
			got = h.Replies(harness.GroupChat, 1)
			assert.Equal(t, draftAnswer, got[0])
			assert.Empty(t, h.TG.Drafts(harness.GroupChat))
			assert.NotEmpty(t, h.TG.ChatActions(harness.GroupChat))
			assert.Len(t, h.TG.Drafts(harness.OwnerID), ownerDrafts, "the group's run drafts nowhere")
		})
	}
}

// With every draft refused, the answer still arrives, once.
func TestDraftFailureNeverHoldsTheAnswer(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := harness.New(t, harness.Options{Owner: true})
			h.TG.FailDrafts(code)
			h.OwnerSays(draftPrompt)
			got := h.Replies(harness.OwnerID, 1)
			assert.Equal(t, draftAnswer, got[0])
			assert.Positive(t, h.TG.Calls("sendMessageDraft"), "drafts were tried")
			assert.Empty(t, h.TG.Drafts(harness.OwnerID))

			h.OwnerSays("REPLY next")
			got = h.Replies(harness.OwnerID, 2)
			assert.Equal(t, []string{draftAnswer, "next"}, got, "the answer once")
		})
	}
}

// The admin commands are the menu of the owner's chat and of no other
// chat: none before pairing, the owner's chat's once paired.
func TestCommandMenuOwnerChatOnly(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: false})
	require.True(t, h.Stdout.Wait(harness.Ctx(t), "/pair "), "serve prints a pairing code")
	code := strings.Fields(h.Stdout.String()[strings.Index(h.Stdout.String(), "/pair "):])[1]
	h.Say(harness.StrangerID, "private", "", harness.StrangerID, "/pair WRONG")
	h.OwnerSays("/pair " + code)
	h.Replies(harness.OwnerID, 1) // the menu is set before the confirmation is queued
	assert.Equal(t, []string{fmt.Sprintf("chat:%d", harness.OwnerID)}, h.TG.CommandScopes(), "only the owner's chat has a menu")
	var names []string
	for _, c := range h.TG.CommandsFor(fmt.Sprintf("chat:%d", harness.OwnerID)) {
		names = append(names, c.Command)
	}
	for _, want := range []string{"register", "unregister", "schedule", "status", "new", "help"} {
		assert.Contains(t, names, want)
	}

	// After a restart, the same: the default menu every chat sees stays empty.
	h.Stop()
	h.Start()
	h.OwnerSays("/help")
	got := h.Replies(harness.OwnerID, 2)
	assert.Contains(t, got[1], "e.g. /register ")
	assert.Equal(t, []string{fmt.Sprintf("chat:%d", harness.OwnerID)}, h.TG.CommandScopes())
	assert.Empty(t, h.TG.Commands())
}
