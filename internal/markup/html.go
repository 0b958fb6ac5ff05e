// Package markup turns the Markdown a model writes into Telegram's HTML dialect and
// splits long answers into message-sized chunks. It is pure: no I/O, no state.
//
// Telegram accepts only a handful of HTML tags (b, i, u, s, code, pre, a, blockquote …)
// and rejects the whole message when the markup is malformed, so everything here is
// built to be well-formed by construction: every tag opened is closed, tags nest
// properly, and all other text is escaped.
package markup

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ToHTML renders md as Telegram HTML.
//
// Supported: paragraphs and line breaks (kept as newlines), **bold** / __bold__,
// *italic* / _italic_, ~~strike~~, `inline code`, fenced ``` code blocks (with an
// optional language -> <pre><code class="language-x">), [links](url) with an
// http/https/tg/mailto URL, "# headings" (rendered as a bold line), "> quotes"
// (blockquote) and "- bullets" (kept as text with "•"). Markers without a partner are
// left as literal text. An unclosed code fence runs to the end of the text, as in
// CommonMark. Inline markup does not span lines.
func ToHTML(md string) string {
	md = normalize(md)
	lines := strings.Split(md, "\n")
	var out strings.Builder
	out.Grow(len(md) + len(md)/8)
	first := true
	newline := func() {
		if !first {
			out.WriteByte('\n')
		}
		first = false
	}
	for i := 0; i < len(lines); {
		line := lines[i]
		if f, ok := parseFenceOpen(line); ok {
			// Collect the body up to the closing fence (or the end of the text).
			j := i + 1
			for j < len(lines) && !isFenceClose(lines[j], f.marker) {
				j++
			}
			newline()
			writeCodeBlock(&out, f.lang, lines[i+1:min(j, len(lines))])
			i = j + 1
			continue
		}
		if isQuoteLine(line) {
			j := i
			var quoted []string
			for j < len(lines) && isQuoteLine(lines[j]) {
				quoted = append(quoted, quoteBody(lines[j]))
				j++
			}
			newline()
			out.WriteString("<blockquote>")
			for k, q := range quoted {
				if k > 0 {
					out.WriteByte('\n')
				}
				out.WriteString(renderLine(q))
			}
			out.WriteString("</blockquote>")
			i = j
			continue
		}
		newline()
		out.WriteString(renderLine(line))
		i++
	}
	return out.String()
}

// normalize makes the text valid UTF-8 with \n line ends, which is what Telegram wants.
func normalize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.Contains(s, "\r") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return s
}

type fence struct {
	marker string // the backtick run that opened the block (3 or more)
	lang   string // sanitized language, may be empty
	info   string // the raw info string after the marker
}

// parseFenceOpen reports whether line opens a fenced code block: up to three spaces
// of indentation, then three or more backticks, then an optional info string.
func parseFenceOpen(line string) (fence, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, "```") {
		return fence{}, false
	}
	n := 0
	for n < len(t) && t[n] == '`' {
		n++
	}
	info := strings.TrimSpace(t[n:])
	if strings.Contains(info, "`") {
		// CommonMark: a backtick in the info string means this is inline code, not a fence.
		return fence{}, false
	}
	lang := ""
	if fields := strings.Fields(info); len(fields) > 0 && validLang(fields[0]) {
		lang = fields[0]
	}
	return fence{marker: t[:n], lang: lang, info: info}, true
}

func isFenceClose(line, marker string) bool {
	t := strings.TrimSpace(line)
	if len(line)-len(strings.TrimLeft(line, " ")) > 3 || len(t) < len(marker) {
		return false
	}
	return strings.Trim(t, "`") == ""
}

// validLang keeps the class attribute boring: a short run of safe characters.
func validLang(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_+-.#", r))) {
			return false
		}
	}
	return true
}

func writeCodeBlock(out *strings.Builder, lang string, body []string) {
	if lang != "" {
		out.WriteString(`<pre><code class="language-` + lang + `">`)
	} else {
		out.WriteString("<pre>")
	}
	out.WriteString(escapeText(strings.Join(body, "\n")))
	if lang != "" {
		out.WriteString("</code></pre>")
	} else {
		out.WriteString("</pre>")
	}
}

func isQuoteLine(line string) bool {
	t := strings.TrimLeft(line, " ")
	return len(line)-len(t) <= 3 && strings.HasPrefix(t, ">")
}

func quoteBody(line string) string {
	t := strings.TrimLeft(line, " ")
	t = strings.TrimPrefix(t, ">")
	return strings.TrimPrefix(t, " ")
}

// renderLine handles the line-level constructs (heading, bullet) and then the inline markup.
func renderLine(line string) string {
	t := strings.TrimLeft(line, " \t")
	indent := line[:len(line)-len(t)]
	if level := headingLevel(t); level > 0 {
		text := strings.TrimSpace(t[level:])
		text = strings.TrimSpace(strings.TrimRight(text, "#"))
		if text == "" {
			return escapeText(line)
		}
		return "<b>" + renderInline(text, true) + "</b>"
	}
	if len(t) >= 2 && strings.ContainsRune("-*+", rune(t[0])) && t[1] == ' ' && !isRule(t) {
		return escapeText(indent) + "• " + renderInline(t[2:], true)
	}
	return escapeText(indent) + renderInline(t, true)
}

func headingLevel(t string) int {
	n := 0
	for n < len(t) && n < 7 && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(t) || (t[n] != ' ' && t[n] != '\t') {
		return 0
	}
	return n
}

// isRule recognises "* * *" / "- - -" thematic breaks so they are not taken for bullets.
func isRule(t string) bool {
	c := t[0]
	count := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case c:
			count++
		case ' ', '\t':
		default:
			return false
		}
	}
	return count >= 3
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
var attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func escapeText(s string) string { return htmlEscaper.Replace(s) }
