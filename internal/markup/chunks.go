package markup

import (
	"strings"
	"unicode/utf8"
)

// Messages splits an answer into the Markdown of the Telegram messages that carry
// it, once, when the answer is stored: each part goes out as exactly one
// message, whether Telegram takes its HTML or it falls back to plain text. A
// part fits when both its source (the plain-text fallback) and the visible text
// of its HTML (what Telegram counts after parsing entities) are at most limit
// UTF-16 units. Parts that are only whitespace are dropped: Telegram refuses
// empty messages.
func Messages(md string, limit int) []string {
	if limit < minLimit {
		limit = minLimit
	}
	var out []string
	appendMessages(&out, normalize(md), limit, limit, 0)
	return out
}

// maxResplit bounds the re-splitting; each round shrinks the part, so this is
// only a guard against pathological growth.
const maxResplit = 8

func appendMessages(out *[]string, md string, splitLimit, limit, depth int) {
	for _, part := range Split(md, splitLimit) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n := VisibleLen(ToHTML(part))
		if n <= limit || depth >= maxResplit {
			// Past maxResplit the part is sent as plain text, which fits.
			*out = append(*out, part)
			continue
		}
		pl := Len(part)
		// Shrink in proportion to the growth, with a margin, and always by at least one unit.
		next := min(pl*limit/n*9/10, pl-1)
		if next < minLimit {
			*out = append(*out, part)
			continue
		}
		appendMessages(out, part, next, limit, depth+1)
	}
}

// VisibleLen is the length Telegram gives a message sent with the HTML parse
// mode: the text with its tags removed and its entities decoded, in UTF-16
// units. html is well-formed Telegram HTML as ToHTML makes it.
func VisibleLen(html string) int {
	n := 0
	for i := 0; i < len(html); {
		switch html[i] {
		case '<':
			end := strings.IndexByte(html[i:], '>')
			if end < 0 {
				return n + Len(html[i:])
			}
			i += end + 1
		case '&':
			if end := strings.IndexByte(html[i:], ';'); end > 0 && end <= 8 {
				n++ // every entity ToHTML writes is one BMP character
				i += end + 1
				continue
			}
			n++
			i++
		default:
			r, size := utf8.DecodeRuneInString(html[i:])
			n += runeUnits(r)
			i += size
		}
	}
	return n
}
