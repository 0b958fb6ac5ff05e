package approval

import (
	"fmt"
	"html"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Inert makes untrusted text safe to show the owner inside a <pre> block
// of a Telegram HTML message: escaped as HTML, and every character that
// could hide, reorder or fake text shown as a visible escape instead —
// control characters, format characters (the bidi overrides and isolates,
// zero-width spaces and joiners, the byte order mark), line and paragraph
// separators, spaces other than U+0020, unassigned and private-use code
// points — as \uXXXX (\U00XXXXXX past the BMP), and invalid UTF-8 as \xNN.
// Callers give it text in which a backslash is already escaped (JSON), so
// that an escape it writes cannot be confused with the sender's own.
func Inert(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(html.EscapeString(s[i : i+n]))
		}
		i += n
	}
	return b.String()
}

// hidden reports whether r is shown as an escape rather than as itself.
func hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r),
		unicode.Is(unicode.Zs, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r):
		return true
	case r == '\u115f', r == '\u1160', r == '\u3164', r == '\uffa0', r == '\u2800':
		// Hangul fillers and the blank Braille pattern: letters that draw nothing.
		return true
	}
	// Go's tables have no class of unassigned code points: what is in none
	// of the visible classes is one, or a class above.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}
