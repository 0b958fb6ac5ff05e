package markup

import "strings"

// Chunk is one message of a split answer: the HTML to send and the Markdown source of
// the same part, to send as plain text when Telegram rejects the HTML.
type Chunk struct {
	HTML  string // Telegram HTML, at most the limit; empty when no HTML rendering fits (send Plain)
	Plain string // the Markdown source of this chunk, at most the limit
}

// Chunks splits md so that every chunk's rendered HTML fits in limit UTF-16 units.
// Escaping can make HTML longer than its source, so a chunk whose HTML overflows is
// split again with a smaller limit. Chunks that are only whitespace are dropped:
// Telegram refuses empty messages.
func Chunks(md string, limit int) []Chunk {
	if limit < minLimit {
		limit = minLimit
	}
	md = normalize(md)
	var out []Chunk
	appendChunks(&out, md, limit, limit, 0)
	return out
}

// maxResplit bounds the re-splitting; each round shrinks the chunk, so this is only a
// guard against pathological growth.
const maxResplit = 8

func appendChunks(out *[]Chunk, md string, splitLimit, htmlLimit, depth int) {
	for _, plain := range Split(md, splitLimit) {
		if strings.TrimSpace(plain) == "" {
			continue
		}
		html := ToHTML(plain)
		n := Len(html)
		if n <= htmlLimit {
			*out = append(*out, Chunk{HTML: html, Plain: plain})
			continue
		}
		pl := Len(plain)
		// Shrink in proportion to the growth, with a margin, and always by at least one unit.
		next := min(pl*htmlLimit/n*9/10, pl-1)
		if depth >= maxResplit || next < minLimit {
			*out = append(*out, Chunk{Plain: plain})
			continue
		}
		appendChunks(out, plain, next, htmlLimit, depth+1)
	}
}
