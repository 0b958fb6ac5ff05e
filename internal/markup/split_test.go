package markup

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLen(t *testing.T) {
	assert.Equal(t, 0, Len(""))
	assert.Equal(t, 3, Len("abc"))
	assert.Equal(t, 1, Len("é"))
	assert.Equal(t, 2, Len("😀"), "astral runes are a surrogate pair")
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"empty", "", 10, nil},
		{"fits", "hello", 10, []string{"hello"}},
		{"exact fit", "0123456789", 10, []string{"0123456789"}},
		{"paragraph preferred", "aaaa bbb\ncc\n\ndddd", 14, []string{"aaaa bbb\ncc", "dddd"}},
		{"line preferred over space", "aaa bbb\nccc ddd", 12, []string{"aaa bbb", "ccc ddd"}},
		{"space", "aaaa bbbb cccc", 10, []string{"aaaa bbbb", "cccc"}},
		{"hard cut", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"surrogates never split", "😀😀😀", 3, []string{"😀", "😀", "😀"}},
		{"surrogates packed", "😀😀😀", 4, []string{"😀😀", "😀"}},
		{"multibyte", "ééééé", 2, []string{"éé", "éé", "é"}},
		{"trailing separator dropped", "abcde\n", 5, []string{"abcde"}},
		{"no empty chunks from leading separators", "\n\nabc", 2, []string{"\n", "ab", "c"}},
		{"limit below two is two", "abc", 0, []string{"ab", "c"}},
		{"invalid utf8 replaced", "ab\xffc", 10, []string{"ab\uFFFDc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.in, tt.limit)
			assert.Equal(t, tt.want, got)
			checkSplit(t, tt.in, tt.limit)
		})
	}
}

func TestSplitAvoidsCodeBlock(t *testing.T) {
	code := "```go\nfunc main() {\n\tprintln(1)\n}\n```"
	in := "intro text here\n" + code + "\nafter the block"
	chunks := Split(in, Len(code)+5)
	require.Len(t, chunks, 3)
	assert.Equal(t, "intro text here", chunks[0])
	assert.Equal(t, code, chunks[1], "the code block stays whole")
	assert.Equal(t, "after the block", chunks[2])
}

func TestSplitInsideCodeBlockReopensFence(t *testing.T) {
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("line %03d", i))
	}
	in := "Here:\n```python\n" + strings.Join(lines, "\n") + "\n```\nDone."
	chunks := Split(in, 300)
	require.Greater(t, len(chunks), 3)
	for i, c := range chunks {
		assert.LessOrEqual(t, Len(c), 300)
		html := ToHTML(c)
		require.NoError(t, checkTelegramHTML(html))
		if i > 0 && i < len(chunks)-1 {
			assert.True(t, strings.HasPrefix(c, "```python\n"), "chunk %d reopens the fence: %q", i, c[:20])
			assert.True(t, strings.HasSuffix(c, "\n```"), "chunk %d closes the fence", i)
			assert.True(t, strings.HasPrefix(html, `<pre><code class="language-python">line`), "chunk %d renders as code", i)
		}
	}
	assert.True(t, strings.HasSuffix(chunks[len(chunks)-1], "Done."))
	// Every code line arrives exactly once.
	all := strings.Join(chunks, "\n")
	for _, l := range lines {
		assert.Equal(t, 1, strings.Count(all, l), l)
	}
}

func TestSplitLongReply(t *testing.T) {
	para := strings.Repeat("word ", 199) + "end."
	in := strings.Repeat(para+"\n\n", 10) // ~10,000 chars
	chunks := Split(in, MaxMessageLen)
	require.Len(t, chunks, 3)
	for _, c := range chunks {
		assert.LessOrEqual(t, Len(c), MaxMessageLen)
		assert.True(t, strings.HasSuffix(strings.TrimSpace(c), "end."), "cut at a paragraph break")
	}
}

// checkSplit verifies the exact contract of split (see piece): the bodies and the
// dropped separators rebuild the input; every chunk fits, is non-empty and valid
// UTF-8; fence prefixes and suffixes come in pairs.
func checkSplit(t *testing.T, in string, limit int) {
	t.Helper()
	eff := max(limit, minLimit)
	ps := split(in, limit)
	var rebuilt strings.Builder
	public := Split(in, limit)
	require.Len(t, public, len(ps))
	for i, p := range ps {
		rebuilt.WriteString(p.body + p.sep)
		require.Contains(t, []string{"", " ", "\n", "\n\n"}, p.sep)
		c := p.text()
		require.Equal(t, c, public[i])
		require.NotEmpty(t, c, "chunk %d", i)
		require.True(t, utf8.ValidString(c), "chunk %d", i)
		require.LessOrEqual(t, Len(c), eff, "chunk %d: %q", i, c)
		require.NotEmpty(t, p.body, "chunk %d has input text", i)
		if p.prefix != "" {
			require.NotEmpty(t, ps[i-1].suffix, "a reopened fence follows a closed one")
			require.True(t, strings.HasPrefix(p.prefix, "```") && strings.HasSuffix(p.prefix, "\n"))
		}
		if p.suffix != "" {
			require.True(t, strings.HasPrefix(p.suffix, "\n```"))
		}
	}
	require.Equal(t, strings.ToValidUTF8(in, "\uFFFD"), rebuilt.String())
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world", 5)
	f.Add("para one\n\npara two\nline\nwords and words", 12)
	f.Add("😀😀😀a😀", 3)
	f.Add("```go\nx := 1\ny := 2\n```\ntext after", 20)
	f.Add("```\nunclosed code block with many words in it", 16)
	f.Add("\n\n\n\n  \n", 2)
	f.Add("a\xffb\xfe", 2)
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if limit < 0 || limit > 500 || len(in) > 5000 {
			t.Skip()
		}
		checkSplit(t, in, limit)
	})
}

func TestMessages(t *testing.T) {
	t.Run("short", func(t *testing.T) {
		assert.Equal(t, []string{"**hi** there"}, Messages("**hi** there", MaxMessageLen))
	})
	t.Run("whitespace dropped", func(t *testing.T) {
		assert.Empty(t, Messages(" \n\n \n", 100))
	})
	t.Run("escaping does not count", func(t *testing.T) {
		// 4,000 visible characters that escape to 20,000 bytes of HTML are one
		// message: Telegram counts the text after parsing entities.
		in := strings.Repeat("&", 2000) + strings.Repeat("<", 2000)
		got := Messages(in, MaxMessageLen)
		require.Len(t, got, 1)
		assert.Equal(t, 4000, VisibleLen(ToHTML(got[0])))
	})
	t.Run("markup shrinks what is counted", func(t *testing.T) {
		in := strings.Repeat("**bold** ", 400) // 3,600 units of source
		got := Messages(in, MaxMessageLen)
		require.Len(t, got, 1)
		assert.Less(t, VisibleLen(ToHTML(got[0])), Len(got[0]))
	})
	t.Run("long reply", func(t *testing.T) {
		in := strings.Repeat("Some **bold** text & more <text>.\n", 300)
		got := Messages(in, MaxMessageLen)
		require.Greater(t, len(got), 2)
		for _, m := range got {
			assert.LessOrEqual(t, Len(m), MaxMessageLen)
			assert.LessOrEqual(t, VisibleLen(ToHTML(m)), MaxMessageLen)
			require.NoError(t, checkTelegramHTML(ToHTML(m)))
		}
		assert.Equal(t, strings.TrimSpace(in), strings.TrimSpace(strings.Join(got, "\n")), "no text lost")
	})
}

func TestVisibleLen(t *testing.T) {
	for _, tc := range []struct {
		html string
		want int
	}{
		{"", 0},
		{"plain", 5},
		{"<b>bold</b>", 4},
		{"&lt;&amp;&gt;&quot;", 4},
		{`<a href="https://example.com/&amp;x">link</a>`, 4},
		{`<pre><code class="language-go">x := 1</code></pre>`, 6},
		{"👍", 2},
		{"a & b", 5},
	} {
		assert.Equal(t, tc.want, VisibleLen(tc.html), tc.html)
	}
}

func FuzzMessages(f *testing.F) {
	f.Add("**a** & <b> `c` [l](https://x.y)\n\n```go\nx\n```", 40)
	f.Add(strings.Repeat("&<>", 50), 16)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if limit < 0 || limit > 500 || len(md) > 5000 {
			t.Skip()
		}
		for _, m := range Messages(md, limit) {
			require.NotEmpty(t, strings.TrimSpace(m))
			require.LessOrEqual(t, Len(m), max(limit, minLimit), "the plain-text fallback fits")
			html := ToHTML(m)
			require.NoError(t, checkTelegramHTML(html))
			if VisibleLen(html) > max(limit, minLimit) {
				// Sent as plain text then; that fits (above).
				continue
			}
		}
	})
}

func BenchmarkMessages(b *testing.B) {
	in := strings.Repeat("Some **bold** text & more <text> with `code`.\n\n", 1000)
	for b.Loop() {
		Messages(in, MaxMessageLen)
	}
}
