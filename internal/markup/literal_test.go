package markup

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var codeRE = regexp.MustCompile(`<code>(.*?)</code>`)

// Whatever an untrusted string holds, Literal shows it as one code entity
// and nothing else: no tag of its own, no link, nothing outside the code.
func TestLiteralIsInert(t *testing.T) {
	tests := []struct {
		name, in, shown string
	}{
		{"plain", "Family Chat", "Family Chat"},
		{"markdown link", "[Pay here](https://evil.example/login)", "[Pay here](https://evil.example/login)"},
		{"html", `<a href="https://evil.example">x</a><b>y</b>`, `<a href="https://evil.example">x</a><b>y</b>`},
		{"bare url", "https://evil.example/x?a=1&b=2", "https://evil.example/x?a=1&b=2"},
		{"mention hashtag command", "@evil_bot #win /unregister $USD", "@evil_bot #win /unregister $USD"},
		{"emphasis", "**bold** _it_ ~~s~~", "**bold** _it_ ~~s~~"},
		{"backticks", "a ` b `` c ``` d", "a ` b `` c ``` d"},
		{"backtick at the ends", "`x`", "`x`"},
		{"closes a label", "x](https://evil.example)", "x](https://evil.example)"},
		{"newlines", "line1\n# heading\n> quote\n```\nfence", "line1 # heading > quote ``` fence"},
		{"bidi override", "abc\u202Eevil.exe", "abcevil.exe"},
		{"control chars", "a\x00b\x1bc", "a b c"},
		{"escapes", `\` + "`" + `x\`, `\` + "`" + `x\`},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
		{"empty", " \n\t", "(empty)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, line := range []string{
				"title " + Literal(tc.in, 0) + " — chat 5",
				"• [x] " + Literal(tc.in, 0) + " (supergroup)",
				"see [ " + Literal(tc.in, 0) + " ok", // an open '[' of host text before it
				"**bold** " + Literal(tc.in, 0) + " " + Literal(tc.in, 0),
			} {
				out := ToHTML(line)
				assert.NotContains(t, out, "<a ", "no link: %s", out)
				if tc.shown == "(empty)" {
					assert.Contains(t, out, "(empty)")
					continue
				}
				m := codeRE.FindAllStringSubmatch(out, -1)
				require.NotEmpty(t, m, out)
				for _, c := range m {
					assert.Equal(t, tc.shown, html.UnescapeString(c[1]), out)
				}
				// Outside the code, only the host's own text.
				rest := codeRE.ReplaceAllString(out, "")
				assert.NotContains(t, rest, "evil", out)
				assert.NotContains(t, strings.ReplaceAll(rest, "</b>", ""), "</", out)
			}
		})
	}
}

func TestLiteralCuts(t *testing.T) {
	assert.Equal(t, "` abcd… `", Literal("abcdefgh", 5))
	assert.Equal(t, "` ab `", Literal("ab", 5))
	assert.Equal(t, "x y…", OneLine("x y  \n z", 4))
	assert.Equal(t, "x…", OneLine("x   yyyy", 3))
}

// A code span binds tighter than a link label, as in CommonMark.
func TestLinkLabelDoesNotCloseInsideCode(t *testing.T) {
	assert.Equal(t, "[a <code>]</code>(https://e.com)", ToHTML("[a `]`(https://e.com)"))
	assert.Equal(t, `<a href="https://e.com"><code>x</code></a>`, ToHTML("[`x`](https://e.com)"))
	assert.Equal(t, "<a href=\"https://e.com\">a `b</a>", ToHTML("[a `b](https://e.com)"), "an unmatched backtick is text")
}
