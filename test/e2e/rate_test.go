package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/test/harness"
)

const otherMember = int64(8888)

// End to end with the default rate (20 calls per member and hour): the
// 21st call of one member is stored as context and not answered, the group
// is told once, and another member's call is still answered — with the
// 21st call in its context.
func TestSenderRate(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	say := func(from int64, text string) {
		h.Say(harness.GroupChat, "supergroup", "Family Chat", from, text)
	}
	for i := 1; i <= 20; i++ {
		say(harness.MemberID, fmt.Sprintf("@Andy call-%d", i))
	}
	h.WaitFor(harness.GroupChat, "call-20")
	say(harness.MemberID, "@Andy call-21")
	say(harness.MemberID, "@Andy call-22")
	h.WaitFor(harness.GroupChat, "called me 20 times within the hour")
	say(otherMember, "@Andy other-turn")
	h.WaitFor(harness.GroupChat, "other-turn")

	var answer string
	notices := 0
	for _, s := range harness.Texts(h.TG.SentTo(harness.GroupChat)) {
		if strings.Contains(s, "other-turn") {
			answer = s
		}
		if strings.Contains(s, "called me 20 times") {
			notices++
		}
	}
	assert.Equal(t, 1, notices, "told once")
	assert.Contains(t, answer, "call-21", "the 21st call is context of the next answer")
	for _, s := range harness.Texts(h.TG.SentTo(harness.GroupChat)) {
		if strings.Contains(s, "call-21") {
			assert.Contains(t, s, "other-turn", "no answer of its own for the 21st call")
		}
	}

	st, err := store.Open(context.Background(), filepath.Join(h.Dir, "data", "clawpen.db"))
	require.NoError(t, err)
	defer st.Close()
	msgs, err := st.MessagesAfter(context.Background(), harness.GroupChat, 0, 0)
	require.NoError(t, err)
	triggered := map[string]bool{}
	for _, m := range msgs {
		triggered[strings.TrimPrefix(m.Text, "@Andy ")] = m.Triggered
	}
	assert.True(t, triggered["call-20"])
	assert.False(t, triggered["call-21"], "stored, not calling the agent")
	assert.False(t, triggered["call-22"])
	assert.True(t, triggered["other-turn"])
	assert.Contains(t, h.AuditLog(), fmt.Sprintf("family rate deny user %d reached 20 calls in an hour", harness.MemberID))
}
