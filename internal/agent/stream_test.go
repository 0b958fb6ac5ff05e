package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestDraftText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Hello", "Hello"},
		{"Hello <", "Hello"},
		{"Hello <inte", "Hello"},
		{"Hello <INTERNAL", "Hello"},
		{"Hello <internal>secret", "Hello"},
		{"Hello <internal>secret</inter", "Hello"},
		{"<internal>a</internal>Hi <", "Hi"},
		{"a </inter", "a"},
		{"a < b", "a < b"},
		{"1 <2", "1 <2"},
		{"<b>bold</b> <em", "<b>bold</b> <em"}, // only a possible tag of ours is held back
		{"<internal>a</internal>Hi", "Hi"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, DraftText(tt.in))
		})
	}
}

// Every prefix of a stream shows no internal text at any point.
func TestDraftTextNeverShowsInternal(t *testing.T) {
	full := "Sure. <internal>the SECRET plan</internal>Here it is.<Internal>MORE SECRET</INTERNAL> Done."
	for i := range len(full) + 1 {
		got := DraftText(full[:i])
		assert.NotContains(t, got, "SECRET", "prefix %q", full[:i])
		assert.NotContains(t, strings.ToLower(got), "<in", "prefix %q", full[:i])
	}
}

func TestProgressThrottleAndBudget(t *testing.T) {
	var got []string
	now := time.Unix(0, 0)
	p := newProgress(func(e domain.Event) {
		assert.Equal(t, domain.EventProgress, e.Type)
		got = append(got, e.Text)
	}, func() time.Time { return now })

	p.text("   ") // nothing visible yet
	p.text("He")  // the first visible text: at once
	p.text("Hel") // too soon
	now = now.Add(progressEvery)
	p.text("He")   // what was shown: nothing new
	p.text("Hell") // due and changed
	now = now.Add(progressEvery)
	p.text("Hell <inter") // the same once held back
	assert.Equal(t, []string{"He", "Hell"}, got)

	big := strings.Repeat("x", progressBudget)
	now = now.Add(progressEvery)
	p.text(big)
	now = now.Add(progressEvery)
	p.text(big + "y") // the budget is spent: no more
	assert.Equal(t, 3, len(got))
}
