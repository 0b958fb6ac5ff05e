package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/test/harness"
)

// requestWith is the model request whose newest prompt holds marker.
func requestWith(t *testing.T, h *harness.Host, marker string) fakellm.Request {
	t.Helper()
	for _, r := range h.LLM.Requests() {
		if strings.Contains(harness.PromptOf(r), marker) {
			return r
		}
	}
	require.FailNow(t, "no model request for "+marker)
	return fakellm.Request{}
}

// said reports whether any message of the request holds s.
func said(r fakellm.Request, s string) bool {
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if strings.Contains(b.Text, s) || strings.Contains(b.Content, s) {
				return true
			}
		}
	}
	return false
}

// TestNewForgetsTheConversation: after /new (chat) or `clawpen groups new`
// (CLI) the group's next run sends the model no earlier conversation; a
// symlink planted in the session dir in place of the transcript is removed
// itself, and what it points at is kept.
func TestNewForgetsTheConversation(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	session := filepath.Join(h.Dir, "data", "sessions", "main")

	h.OwnerSays("FIRST-WORDS")
	h.Replies(harness.OwnerID, 1)
	h.OwnerSays("SECOND-WORDS")
	h.Replies(harness.OwnerID, 2)
	require.True(t, said(requestWith(t, h, "SECOND-WORDS"), "FIRST-WORDS"), "the control: a run resumes the conversation")

	h.OwnerSays("/new")
	got := h.Replies(harness.OwnerID, 3)
	assert.Contains(t, got[2], "Forgot the conversation of main")
	h.OwnerSays("THIRD-WORDS")
	h.Replies(harness.OwnerID, 4)
	third := requestWith(t, h, "THIRD-WORDS")
	assert.False(t, said(third, "FIRST-WORDS") || said(third, "SECOND-WORDS"), "no earlier conversation after /new")
	// Archived on the host, not deleted, and out of the sandbox's view.
	archive := filepath.Join(h.Dir, "data", "transcripts", "main")
	entries, err := os.ReadDir(archive)
	require.NoError(t, err, "the forgotten conversation is archived")
	require.Len(t, entries, 1)
	old, err := os.ReadFile(filepath.Join(archive, entries[0].Name()))
	require.NoError(t, err)
	assert.Contains(t, string(old), "SECOND-WORDS")

	h.OwnerSays("/new nosuchgroup")
	got = h.Replies(harness.OwnerID, 5)
	assert.Contains(t, got[4], "no group has the folder nosuchgroup")

	// The session dir is the sandbox's: a symlink there in place of the
	// transcript must not make the host delete its target.
	victim := filepath.Join(h.Dir, "victim.json")
	require.NoError(t, os.WriteFile(victim, []byte("VICTIM"), 0o644))
	transcript := filepath.Join(session, "transcript.json")
	require.FileExists(t, transcript, "THIRD-WORDS was saved")
	require.NoError(t, os.Remove(transcript))
	require.NoError(t, os.Symlink(victim, transcript))
	out := h.CLI("groups", "new", "main")
	assert.Contains(t, out, "forgot the conversation of main")
	b, err := os.ReadFile(victim)
	require.NoError(t, err, "the symlink's target is kept")
	assert.Equal(t, "VICTIM", string(b))
	_, err = os.Lstat(transcript)
	assert.ErrorIs(t, err, os.ErrNotExist, "the symlink itself is removed")

	h.OwnerSays("FOURTH-WORDS")
	h.Replies(harness.OwnerID, 6)
	assert.False(t, said(requestWith(t, h, "FOURTH-WORDS"), "THIRD-WORDS"), "no earlier conversation after clawpen groups new")

	out = h.CLIFails("groups", "new", "nosuchgroup")
	assert.Contains(t, out, "no group has the folder")
}
