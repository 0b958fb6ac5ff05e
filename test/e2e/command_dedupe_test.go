package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

// TestAdminCommandsNotRunTwiceAfterCrash: the host is killed after handling
// /schedule and /register but, as far as Telegram knows, before it saved the
// update offset, so the same messages come again after the restart. They are
// not run a second time: one task, one registration, one confirmation each.
func TestAdminCommandsNotRunTwiceAfterCrash(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.OwnerSays("hello")
	h.WaitFor(harness.OwnerID, "hello")

	schedule := `/schedule main interval 1h "dedupe check"`
	register := fmt.Sprintf("/register %d family Family Chat", harness.GroupChat)
	owner := faketg.User{ID: harness.OwnerID, FirstName: "Owner"}
	h.TG.PushMessage(harness.OwnerID, "private", "", owner, schedule, faketg.WithMessageID(900001))
	h.TG.PushMessage(harness.OwnerID, "private", "", owner, register, faketg.WithMessageID(900002))
	h.WaitFor(harness.OwnerID, "Scheduled")
	h.WaitFor(harness.OwnerID, "family")
	h.WaitDelivered() // the confirmations are marked sent: only the commands come again
	h.Crash()

	// Telegram hands out the same messages again.
	h.TG.PushMessage(harness.OwnerID, "private", "", owner, schedule, faketg.WithMessageID(900001))
	h.TG.PushMessage(harness.OwnerID, "private", "", owner, register, faketg.WithMessageID(900002))
	h.Start()
	h.OwnerSays("after the restart")
	h.WaitFor(harness.OwnerID, "after the restart")

	tasks := 0
	for _, tk := range h.Tasks() {
		if strings.Contains(tk.Prompt, "dedupe check") {
			tasks++
		}
	}
	assert.Equal(t, 1, tasks, "the task was scheduled once")
	sent := harness.Texts(h.TG.SentTo(harness.OwnerID))
	count := func(sub string) int {
		n := 0
		for _, s := range sent {
			if strings.Contains(s, sub) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, count("Scheduled"), "one confirmation of /schedule: %q", sent)
	assert.Equal(t, 1, count("Registered"), "one confirmation of /register: %q", sent)
}
