package agent

import (
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// While the model streams, the agent writes the answer so far as progress
// lines, which the host shows as a live draft in the owner's chat. Every
// line repeats the whole text, so they are bounded: at most one per
// progressEvery, and none after progressBudget bytes in a run, which keeps
// a long answer from spending the sandbox's output limit (8 MB) on drafts.
const (
	progressEvery  = 100 * time.Millisecond
	progressBudget = 2 << 20
)

// progress turns the streamed text of each model turn into progress events.
// It is used by one goroutine (the model call's stream loop).
type progress struct {
	emit func(domain.Event)
	now  func() time.Time

	last  time.Time // when the last event was written
	shown string    // its text
	spent int       // bytes of text written so far
}

func newProgress(emit func(domain.Event), now func() time.Time) *progress {
	return &progress{emit: emit, now: now}
}

// text takes the text of the turn so far. The first visible text goes out
// at once: it is what the owner waits for.
func (p *progress) text(raw string) {
	if p.emit == nil || p.spent >= progressBudget {
		return
	}
	t := DraftText(raw)
	if t == "" || t == p.shown {
		return
	}
	now := p.now()
	if !p.last.IsZero() && now.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.shown = now, t
	p.spent += len(t)
	p.emit(domain.Event{Type: domain.EventProgress, Text: t})
}

// DraftText is what of a partly streamed answer may be shown: StripInternal,
// and a trailing piece that may yet become an <internal> or </internal> tag
// ("…<inte") held back, so private text never shows, not even for a moment.
func DraftText(s string) string {
	if i := strings.LastIndexByte(s, '<'); i >= 0 && tagPrefix(s[i:]) {
		s = s[:i]
	}
	return StripInternal(s)
}

// tagPrefix reports whether s is a proper beginning of <internal> or
// </internal>, ASCII case ignored.
func tagPrefix(s string) bool {
	for _, tag := range []string{openInternal, closeInternal} {
		if len(s) < len(tag) && strings.EqualFold(s, tag[:len(s)]) {
			return true
		}
	}
	return false
}
