package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// modelEcho is a TOOL directive whose object the fake model cannot parse:
// its error answer quotes it (as real providers quote what they reject),
// and the agent fails with that error. Text a group member wrote.
const modelEcho = "TOOL bash {[Pay here](https://evil.example/pay) <b>x</b> evil.example/x @evil_bot PHISH-MARK}"

var codeElem = regexp.MustCompile(`(?s)<code>.*?</code>`)

// assertInert checks messages as Telegram would get them: no link, nothing of
// the phish outside the code that keeps untrusted text inert.
func assertInert(t *testing.T, msgs []faketg.SentMessage) {
	t.Helper()
	for _, m := range msgs {
		assert.NotContains(t, m.Text, "<a ", "a link: %s", m.Text)
		outside := codeElem.ReplaceAllString(m.Text, "")
		for _, bad := range []string{"evil.example", "@evil_bot", "<b>x", "PHISH-MARK", "Pay here"} {
			assert.NotContains(t, outside, bad, "outside code: %s", m.Text)
		}
	}
}

// A group's failing run reaches the owner as the host's words: the group,
// that it failed, the class. Nothing the agent (or its model) wrote.
func TestGroupErrorTextNeverReachesOwner(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	before := len(h.TG.SentTo(harness.OwnerID))

	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy\n"+modelEcho)
	notice := h.Replies(harness.GroupChat, 1)[0]
	assert.Equal(t, "Sorry, I could not answer this time. The owner has been told.", notice)
	h.WaitFor(harness.OwnerID, "failed after retries")
	owner := h.TG.SentTo(harness.OwnerID)[before:]
	require.Len(t, owner, 1, "one notice: %v", harness.Texts(owner))
	assert.Equal(t, "The agent of group family failed after retries: the agent reported an error or wrote malformed output. "+
		"Its members were told that it failed; the details are in the host's log.", harness.Plain(owner[0].Text))
	for _, m := range append(owner, h.TG.SentTo(harness.GroupChat)...) {
		assert.NotContains(t, m.Text, "PHISH-MARK")
		assert.NotContains(t, m.Text, "evil")
	}
	assert.Contains(t, h.Stderr.String(), "PHISH-MARK", "the details are in the host's log")

	// The owner's own agent failing the same way: the class, not the text.
	h.OwnerSays(modelEcho)
	h.WaitFor(harness.OwnerID, "Sorry, I could not answer")
	assertInert(t, h.TG.SentTo(harness.OwnerID)[before:])
	h.Stop()
	audit := h.AuditLog()
	assert.Contains(t, audit, "agent.run error failed after retries: the agent reported an error")
	assert.NotContains(t, audit, "PHISH-MARK")
}

// A task that fails with crafted text: the notice and /tasks give the class.
func TestTaskFailureShownInHostWords(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	before := len(h.TG.SentTo(harness.OwnerID))
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	// /tasks shows the prompt's first characters; the directive is further on.
	h.OwnerSays(fmt.Sprintf("/schedule family once %s %s %s", at, strings.Repeat("the nightly check, please. ", 4), modelEcho))
	h.WaitFor(harness.OwnerID, "Scheduled #1")
	h.WaitFor(harness.OwnerID, "Task #1 of group family failed: the agent reported an error or wrote malformed output.")
	h.OwnerSays("/tasks")
	h.WaitFor(harness.OwnerID, "last run")
	msgs := h.TG.SentTo(harness.OwnerID)[before:]
	assertInert(t, msgs)
	tasks := harness.Plain(msgs[len(msgs)-1].Text)
	assert.Contains(t, tasks, "error — the agent reported an error or wrote malformed output", tasks)
	assert.Empty(t, h.TG.SentTo(harness.GroupChat), "a failed task says nothing in its group")
}

// Chat titles, group names and task prompts are shown as inert code: no link,
// no HTML, no mention, whatever their authors put in them.
func TestUntrustedNamesAreInert(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.OwnerSays("hi")
	h.Replies(harness.OwnerID, 1)
	title := "[Pay here](https://evil.example/pay) <b>x</b> evil.example @evil_bot TITLE-MARK"
	const stranger = int64(-100555)
	h.Say(stranger, "supergroup", title, harness.MemberID, "hello")

	before := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/groups")
	h.WaitFor(harness.OwnerID, "TITLE-MARK")
	// Registered without a display name, the group is named by its title.
	h.OwnerSays(fmt.Sprintf("/register %d evil", stranger))
	h.WaitFor(harness.OwnerID, "groups/evil")
	h.OwnerSays("/schedule evil interval 1h [Pay here](https://evil.example/pay) <b>x</b> @evil_bot")
	h.WaitFor(harness.OwnerID, "Scheduled #1")
	h.OwnerSays("/tasks")
	h.OwnerSays("/status")
	h.OwnerSays("/groups")
	h.WaitFor(harness.OwnerID, "Next due:")
	msgs := h.Replies(harness.OwnerID, before+6)
	assertInert(t, h.TG.SentTo(harness.OwnerID)[before:])
	seen := strings.Join(msgs[before:], "\n")
	assert.Contains(t, seen, title, "shown whole, as text")
	assert.Contains(t, seen, "[Pay here](https://evil.example/pay) <b>x</b> @evil_bot", "the prompt, as text")
}
