package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// TestSplitAnswerArrivesOncePerPartDespiteServerErrors injects 5xx answers
// between the parts of a long answer full of characters that HTML escaping
// lengthens: every part arrives exactly once, in order.
func TestSplitAnswerArrivesOncePerPartDespiteServerErrors(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	var words []string
	for i := range 1400 {
		words = append(words, fmt.Sprintf("<&%04d", i))
	}
	h.TG.FailSendsAfter(1, 4, 500, 0)
	h.OwnerSays("REPLY " + strings.Join(words, " "))
	h.Replies(harness.OwnerID, 3)

	sent := h.TG.SentTo(harness.OwnerID)
	require.Len(t, sent, 3, "three parts, none twice")
	var all strings.Builder
	for _, s := range sent {
		all.WriteString(s.Visible)
		all.WriteString(" ")
	}
	last := -1
	for _, w := range words {
		require.Equal(t, 1, strings.Count(all.String(), w+" "), "%s arrived once", w)
		idx := strings.Index(all.String(), w+" ")
		require.Greater(t, idx, last, "%s in order", w)
		last = idx
	}
}

// TestEscapingDoesNotSplitAnswer: an answer of 4,000 visible characters full of
// '<' and '&' is one message (Telegram counts the text after parsing
// entities), sent once even when the first attempts fail.
func TestEscapingDoesNotSplitAnswer(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.TG.FailNextSends(2, 502, 0)
	text := strings.Repeat("<&", 2000)
	h.OwnerSays("REPLY " + text)
	h.Replies(harness.OwnerID, 1)
	sent := h.TG.SentTo(harness.OwnerID)
	require.Len(t, sent, 1)
	assert.True(t, text == sent[0].Visible, "the whole answer in one message (%d of %d characters)", len(sent[0].Visible), len(text))
	assert.Equal(t, "HTML", sent[0].ParseMode)
}
