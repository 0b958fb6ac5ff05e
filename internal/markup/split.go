package markup

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's limit on a message's text, in UTF-16 code units.
const MaxMessageLen = 4096

// minLimit is the smallest limit Split honours: one astral-plane rune takes two
// UTF-16 units and must never be cut in half.
const minLimit = 2

// Len counts s the way Telegram does: in UTF-16 code units.
func Len(s string) int {
	n := 0
	for _, r := range s {
		n += runeUnits(r)
	}
	return n
}

func runeUnits(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// piece is one chunk of a split with the bookkeeping that makes the split exact:
// concatenating body+sep over all pieces gives back the (valid UTF-8) input.
type piece struct {
	prefix string // a reopened code fence, added (not from the input)
	body   string // the input text of this chunk
	suffix string // a closing code fence, added (not from the input)
	sep    string // the separator dropped at the cut after body ("", " ", "\n" or "\n\n")
}

func (p piece) text() string { return p.prefix + p.body + p.suffix }

// Split cuts text into chunks of at most limit UTF-16 code units (a limit below 2 is
// taken as 2). It prefers to cut at a paragraph break ("\n\n"), then a line break,
// then a space, and only then mid-word; the separator at a cut is dropped. It never
// cuts a rune (so never a surrogate pair) and never returns an empty chunk. It avoids
// cutting inside a fenced code block; when it must, it closes the fence at the end of
// the chunk and reopens it (with its language) at the start of the next. Invalid
// UTF-8 is replaced by U+FFFD first, since Telegram accepts only valid UTF-8.
func Split(text string, limit int) []string {
	ps := split(text, limit)
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.text())
	}
	return out
}

type region struct {
	start, end int    // byte range of a fenced block: opening fence line .. end of closing fence line
	reopen     string // the line that reopens the block in a continuation chunk, with "\n"
	close      string // what closes it at the end of a chunk
}

func split(text string, limit int) []piece {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if limit < minLimit {
		limit = minLimit
	}
	if text == "" {
		return nil
	}
	regions := fenceRegions(text)
	var out []piece
	pos := 0
	prefix := ""
	for pos < len(text) {
		budget := limit - Len(prefix)
		if prefixEnd(text, pos, budget) == len(text) {
			out = append(out, piece{prefix: prefix, body: text[pos:]})
			break
		}
		cut, sep, reg := chooseCut(text, pos, budget, regions)
		p := piece{prefix: prefix, body: text[pos:cut], sep: sep}
		prefix = ""
		if reg != nil {
			p.suffix = reg.close
			prefix = reg.reopen
		}
		next := cut + len(sep)
		if next >= len(text) {
			// Only the separator is left: keep it with this piece rather than emit it alone.
			out = append(out, p)
			break
		}
		out = append(out, p)
		pos = next
	}
	return out
}

// chooseCut picks where the chunk starting at pos ends. It returns the cut (end of
// body), the separator to drop, and the fence region the cut falls in (nil if none).
func chooseCut(text string, pos, budget int, regions []region) (int, string, *region) {
	maxOut := prefixEnd(text, pos, budget)
	inside := func(abs int) *region {
		// Regions are sorted and disjoint: find the last one starting before abs.
		i := sort.Search(len(regions), func(i int) bool { return regions[i].start >= abs }) - 1
		if i >= 0 && abs < regions[i].end {
			return &regions[i]
		}
		return nil
	}
	seps := []string{"\n\n", "\n", " "}
	// 1. A separator outside any code block.
	for _, sep := range seps {
		if idx := lastSep(text, pos, maxOut, sep, func(abs int) bool { return inside(abs) == nil }); idx > pos {
			return idx, sep, nil
		}
	}
	// 2. Inside a code block, leaving room to close and reopen the fence.
	if r := inside(maxOut); r != nil && fenceFits(r, budget) {
		maxIn := prefixEnd(text, pos, budget-Len(r.close))
		contentStart := r.contentStart(text)
		ok := func(abs int) bool { return inside(abs) == r && abs >= contentStart }
		for _, sep := range seps[1:] {
			if idx := lastSep(text, pos, maxIn, sep, ok); idx > pos {
				return idx, sep, r
			}
		}
		if maxIn > pos && maxIn > contentStart {
			return maxIn, "", r
		}
	}
	// 3. Hard cut at the limit.
	if maxOut == pos {
		// Cannot happen for budget >= 2, but never loop forever.
		_, size := utf8.DecodeRuneInString(text[pos:])
		maxOut = pos + size
	}
	if r := inside(maxOut); r != nil && fenceFits(r, budget) {
		maxIn := prefixEnd(text, pos, budget-Len(r.close))
		if maxIn > pos && maxIn > r.contentStart(text) {
			return maxIn, "", r
		}
	}
	return maxOut, "", nil
}

// contentStart is where the code after the opening fence line begins.
func (r *region) contentStart(text string) int {
	nl := strings.IndexByte(text[r.start:], '\n')
	if nl < 0 {
		return len(text)
	}
	return r.start + nl + 1
}

// fenceFits reports whether reopening and closing a fence leaves useful room; with
// tiny limits we split code like any other text.
func fenceFits(r *region, budget int) bool {
	return Len(r.reopen)+Len(r.close) <= budget/4
}

// prefixEnd returns the largest byte index e >= pos on a rune boundary such that
// text[pos:e] fits in budget UTF-16 units.
func prefixEnd(text string, pos, budget int) int {
	units := 0
	i := pos
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if units+runeUnits(r) > budget {
			break
		}
		units += runeUnits(r)
		i += size
	}
	return i
}

// lastSep finds the last occurrence of sep starting in (pos, maxEnd] whose position
// satisfies ok; -1 if none.
func lastSep(text string, pos, maxEnd int, sep string, ok func(int) bool) int {
	limitEnd := min(maxEnd+len(sep), len(text))
	window := text[pos:limitEnd]
	for {
		j := strings.LastIndex(window, sep)
		if j <= 0 {
			return -1
		}
		abs := pos + j
		if abs <= maxEnd && ok(abs) {
			return abs
		}
		window = window[:j]
	}
}

// fenceRegions finds the fenced code blocks exactly as ToHTML does.
func fenceRegions(text string) []region {
	var regions []region
	lineStart := 0
	var open *region
	var marker string
	for lineStart <= len(text) {
		nl := strings.IndexByte(text[lineStart:], '\n')
		lineEnd := len(text)
		if nl >= 0 {
			lineEnd = lineStart + nl
		}
		line := text[lineStart:lineEnd]
		if open == nil {
			if f, ok := parseFenceOpen(line); ok {
				open = &region{start: lineStart, reopen: f.marker + f.info + "\n", close: "\n" + f.marker}
				if len(open.reopen) > 64 {
					open.reopen = f.marker + f.lang + "\n"
				}
				marker = f.marker
			}
		} else if isFenceClose(line, marker) {
			open.end = lineEnd
			regions = append(regions, *open)
			open = nil
		}
		if nl < 0 {
			break
		}
		lineStart = lineEnd + 1
	}
	if open != nil {
		open.end = len(text) + 1 // unclosed: the block runs to the end
		regions = append(regions, *open)
	}
	return regions
}
