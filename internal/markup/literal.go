package markup

import (
	"strings"
	"unicode"
)

// Literal puts untrusted text (a chat title, a task prompt) into a
// host-written Markdown message as inert text: flattened to one line, cut to
// at most max characters (marked with "…"), inside a code span, which ToHTML
// renders as <code>…</code> with everything escaped. Telegram drops the
// entities it would detect by itself (links, mentions, hashtags, bot
// commands, e-mail addresses) wherever they overlap a code entity, so
// nothing in s can become clickable, whatever s holds. The span is fenced
// with more backticks than any run in s, so s cannot close it.
//
// Callers keep a Literal off the start of a line and do not put a backtick
// or a backslash right next to it.
func Literal(s string, max int) string {
	s = OneLine(s, max)
	if s == "" {
		return "(empty)"
	}
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	// The spaces inside the fence are stripped by the renderer; they keep a
	// backtick at either end of s from joining the fence.
	return fence + " " + s + " " + fence
}

// OneLine collapses whitespace and control characters to single spaces,
// drops format characters (bidi overrides could reorder the line), and cuts
// s to at most max characters (max <= 0: no cut), marking a cut with "…".
func OneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if r := []rune(s); max > 0 && len(r) > max {
		return strings.TrimRight(string(r[:max-1]), " ") + "…"
	}
	return s
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
