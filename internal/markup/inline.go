package markup

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tokText  tokKind = iota // literal text, escaped on output
	tokHTML                 // already rendered, well-formed HTML (code span, link)
	tokDelim                // an emphasis delimiter: *, _, ** , __ or ~~
)

type token struct {
	kind     tokKind
	s        string // text, HTML, or the delimiter itself
	canOpen  bool
	canClose bool
	open     bool // matched as an opener
	close    bool // matched as a closer
}

// maxOpenerSearch bounds the delimiter matching so a hostile line full of unmatched
// markers costs linear time; only pathological input is affected.
const maxOpenerSearch = 64

// renderInline renders one line of inline markup. links=false inside a link label,
// because Telegram does not nest links.
func renderInline(s string, links bool) string {
	toks := tokenize(s, links)
	matchDelims(toks)
	var out strings.Builder
	out.Grow(len(s) + 16)
	for _, t := range toks {
		switch {
		case t.kind == tokHTML:
			out.WriteString(t.s)
		case t.kind == tokDelim && t.open:
			out.WriteString("<" + delimTag(t.s) + ">")
		case t.kind == tokDelim && t.close:
			out.WriteString("</" + delimTag(t.s) + ">")
		default:
			out.WriteString(escapeText(t.s))
		}
	}
	return out.String()
}

func delimTag(d string) string {
	switch d {
	case "**", "__":
		return "b"
	case "~~":
		return "s"
	default:
		return "i"
	}
}

// matchDelims pairs closers with the nearest compatible opener. Openers between a
// matched pair are dropped (left literal), which is what keeps the tags properly nested.
func matchDelims(toks []token) {
	var stack []int
	for i := range toks {
		t := &toks[i]
		if t.kind != tokDelim {
			continue
		}
		if t.canClose {
			found := -1
			for k := len(stack) - 1; k >= 0 && k >= len(stack)-maxOpenerSearch; k-- {
				if toks[stack[k]].s == t.s {
					found = k
					break
				}
			}
			if found >= 0 {
				toks[stack[found]].open = true
				t.close = true
				stack = stack[:found]
				continue
			}
		}
		if t.canOpen {
			stack = append(stack, i)
		}
	}
}

func tokenize(s string, links bool) []token {
	var toks []token
	start := 0 // start of pending literal text
	flush := func(end int) {
		if end > start {
			toks = append(toks, token{kind: tokText, s: s[start:end]})
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			flush(i)
			toks = append(toks, token{kind: tokText, s: s[i+1 : i+2]})
			i += 2
			start = i
		case c == '`':
			n := runLen(s, i, '`')
			if end, ok := findBacktickRun(s, i+n, n); ok {
				content := s[i+n : end]
				if len(content) >= 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.Trim(content, " ") != "" {
					content = content[1 : len(content)-1]
				}
				if content != "" {
					flush(i)
					toks = append(toks, token{kind: tokHTML, s: "<code>" + escapeText(content) + "</code>"})
					i = end + n
					start = i
					continue
				}
			}
			i += n // literal backticks stay in the pending text
		case c == '[' && links:
			if html, end, ok := parseLink(s, i); ok {
				flush(i)
				toks = append(toks, token{kind: tokHTML, s: html})
				i = end
				start = i
				continue
			}
			i++
		case c == '*' || c == '_' || c == '~':
			n := runLen(s, i, c)
			if (c == '~' && n != 2) || n > 3 {
				i += n
				continue
			}
			prev, next := runeBefore(s, i), runeAfter(s, i+n)
			left := !isSpace(next) && (!isPunct(next) || isSpace(prev) || isPunct(prev))
			right := !isSpace(prev) && (!isPunct(prev) || isSpace(next) || isPunct(next))
			canOpen, canClose := left, right
			if c == '_' {
				// snake_case_names must not turn into italics.
				canOpen = left && (!right || isPunct(prev))
				canClose = right && (!left || isPunct(next))
			}
			if !canOpen && !canClose {
				i += n
				continue
			}
			flush(i)
			d := func(l int) token {
				return token{kind: tokDelim, s: strings.Repeat(string(c), l), canOpen: canOpen, canClose: canClose}
			}
			switch {
			case n == 3 && canOpen && !canClose:
				toks = append(toks, d(2), d(1)) // ***x*** opens bold then italic
			case n == 3:
				toks = append(toks, d(1), d(2)) // …and closes italic then bold
			default:
				toks = append(toks, d(n))
			}
			i += n
			start = i
		default:
			i++
		}
	}
	flush(len(s))
	return toks
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// findBacktickRun finds the next run of exactly n backticks at or after from.
func findBacktickRun(s string, from, n int) (int, bool) {
	for i := from; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		m := runLen(s, i, '`')
		if m == n {
			return i, true
		}
		i += m
	}
	return 0, false
}

// parseLink parses [label](url) at s[i] == '['. It reports ok only for a well-formed
// link; a link with a disallowed scheme is returned as escaped literal text.
func parseLink(s string, i int) (html string, end int, ok bool) {
	labelEnd := labelClose(s, i+1, min(len(s), i+1+maxLabel))
	if labelEnd <= i+1 {
		return "", 0, false
	}
	if labelEnd+1 >= len(s) || s[labelEnd+1] != '(' {
		return "", 0, false
	}
	label := s[i+1 : labelEnd]
	depth := 0
	k := labelEnd + 2
	for ; k < len(s); k++ {
		if k-labelEnd > maxURL {
			return "", 0, false
		}
		c := s[k]
		if c == '(' {
			depth++
		} else if c == ')' {
			if depth == 0 {
				break
			}
			depth--
		} else if c <= ' ' || c == 0x7f {
			return "", 0, false
		}
	}
	if k >= len(s) {
		return "", 0, false
	}
	url := strings.TrimSuffix(strings.TrimPrefix(s[labelEnd+2:k], "<"), ">")
	end = k + 1
	if url == "" || !allowedURL(url) {
		return escapeText(s[i:end]), end, true
	}
	return `<a href="` + attrEscaper.Replace(url) + `">` + renderInline(label, false) + "</a>", end, true
}

// labelClose finds the ']' that ends a link label in s[from:to], or -1. A code
// span binds tighter than a link (as in CommonMark), so a ']' inside one does
// not end the label: text quoted with Literal cannot close a label that host
// text opened before it.
func labelClose(s string, from, to int) int {
	// Linear enough: a matched span is skipped whole, and a run left
	// unmatched is the last of its length before to.
	for k := from; k < to; {
		switch s[k] {
		case ']':
			return k
		case '`':
			n := runLen(s, k, '`')
			if end, ok := findBacktickRun(s[:to], k+n, n); ok {
				k = end + n
				continue
			}
			k += n
		default:
			k++
		}
	}
	return -1
}

// Bounds on a link's parts keep parsing linear on hostile input.
const (
	maxLabel = 1024
	maxURL   = 2048
)

func allowedURL(u string) bool {
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(l, p) && len(l) > len(p) {
			return true
		}
	}
	return false
}

func runeBefore(s string, i int) rune {
	if i == 0 {
		return ' '
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return r
}

func runeAfter(s string, i int) rune {
	if i >= len(s) {
		return ' '
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r
}

func isSpace(r rune) bool { return unicode.IsSpace(r) }

func isPunct(r rune) bool {
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && c > ' ' && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0
}
