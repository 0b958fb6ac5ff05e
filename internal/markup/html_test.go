package markup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToHTML(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"escape", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"quotes stay in text", `say "hi"`, `say "hi"`},
		{"html is text", "<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"},
		{"bold", "**bold** text", "<b>bold</b> text"},
		{"bold underscores", "__bold__", "<b>bold</b>"},
		{"italic star", "an *italic* word", "an <i>italic</i> word"},
		{"italic underscore", "an _italic_ word", "an <i>italic</i> word"},
		{"snake case", "call my_func_name now", "call my_func_name now"},
		{"strike", "~~gone~~", "<s>gone</s>"},
		{"single tilde", "~5 min", "~5 min"},
		{"bold italic", "***both***", "<b><i>both</i></b>"},
		{"nested", "**bold _it_ bold**", "<b>bold <i>it</i> bold</b>"},
		{"unbalanced bold", "**not closed", "**not closed"},
		{"unbalanced italic", "2 * 3 = 6", "2 * 3 = 6"},
		{"crossed markers", "**a _b** c_", "<b>a _b</b> c_"},
		{"inline code", "run `ls -l <dir>` now", "run <code>ls -l &lt;dir&gt;</code> now"},
		{"code keeps markers", "`**x**`", "<code>**x**</code>"},
		{"double backtick code", "``a ` b``", "<code>a ` b</code>"},
		{"unclosed code", "a `b", "a `b"},
		{"escaped star", `\*not italic\*`, "*not italic*"},
		{"backslash path", `C:\Users\me`, `C:\Users\me`},
		{"link", "[site](https://example.com/a?b=1&c=2)", `<a href="https://example.com/a?b=1&amp;c=2">site</a>`},
		{"link quote in href", `[x](https://e.com/"onclick)`, `<a href="https://e.com/&quot;onclick">x</a>`},
		{"link bold label", "[**b**](http://e.com)", `<a href="http://e.com"><b>b</b></a>`},
		{"link parens in url", "[w](https://en.wikipedia.org/wiki/Go_(lang))", `<a href="https://en.wikipedia.org/wiki/Go_(lang)">w</a>`},
		{"tg link", "[me](tg://user?id=1)", `<a href="tg://user?id=1">me</a>`},
		{"mailto", "[mail](mailto:a@b.c)", `<a href="mailto:a@b.c">mail</a>`},
		{"javascript link is text", "[x](javascript:alert(1))", "[x](javascript:alert(1))"},
		{"relative link is text", "[f](./a.md)", "[f](./a.md)"},
		{"not a link", "[just brackets]", "[just brackets]"},
		{"heading", "# Title", "<b>Title</b>"},
		{"heading level 3", "### Sub *x*", "<b>Sub <i>x</i></b>"},
		{"hash without space", "#tag", "#tag"},
		{"bullets", "- one\n* two\n  + three", "• one\n• two\n  • three"},
		{"rule not bullet", "* * *", "* * *"},
		{"paragraphs", "p1 line\n\np2", "p1 line\n\np2"},
		{"fence", "```\na < b\n```", "<pre>a &lt; b</pre>"},
		{"fence lang", "```go\nfmt.Println(\"**x**\")\n```\nafter", "<pre><code class=\"language-go\">fmt.Println(\"**x**\")</code></pre>\nafter"},
		{"fence bad lang", "```\"><script>\nx\n```", "<pre>x</pre>"},
		{"unclosed fence", "text\n```py\nprint(1)", "text\n<pre><code class=\"language-py\">print(1)</code></pre>"},
		{"blockquote", "> quoted **b**\n> two\nafter", "<blockquote>quoted <b>b</b>\ntwo</blockquote>\nafter"},
		{"crlf", "a\r\nb", "a\nb"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
		{"emoji", "**👍 ok**", "<b>👍 ok</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToHTML(tt.in)
			assert.Equal(t, tt.want, got)
			require.NoError(t, checkTelegramHTML(got))
		})
	}
}

func TestCheckTelegramHTMLRejects(t *testing.T) {
	// The checker itself must be able to fail, or the fuzz target proves nothing.
	for _, bad := range []string{"<b>x", "<b><i>x</b></i>", "</b>", "<script>", "a < b", "a > b", "&nbsp;", "<code><b>x</b></code>", `<a href="x>y</a>`} {
		assert.Error(t, checkTelegramHTML(bad), bad)
	}
	for _, good := range []string{"<b>x</b>", "&lt;&amp;&gt;&quot;", `<a href="https://e.com">x</a>`, `<pre><code class="language-go">x</code></pre>`, "<blockquote>q</blockquote>"} {
		assert.NoError(t, checkTelegramHTML(good), good)
	}
}

// checkTelegramHTML is a tiny validator: only Telegram's tags, balanced and nested,
// no raw '<' or '>' in text, only the four named entities, nothing inside code.
func checkTelegramHTML(s string) error {
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '>':
			return fmt.Errorf("raw '>' at %d", i)
		case '&':
			ok := false
			for _, e := range []string{"&amp;", "&lt;", "&gt;", "&quot;"} {
				if strings.HasPrefix(s[i:], e) {
					i += len(e)
					ok = true
					break
				}
			}
			if !ok {
				return fmt.Errorf("bad entity at %d", i)
			}
			continue
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return fmt.Errorf("raw '<' at %d", i)
			}
			tag := s[i+1 : i+end]
			i += end + 1
			if strings.HasPrefix(tag, "/") {
				name := tag[1:]
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return fmt.Errorf("unexpected </%s>", name)
				}
				stack = stack[:len(stack)-1]
				continue
			}
			name, attr, _ := strings.Cut(tag, " ")
			switch name {
			case "b", "i", "u", "s", "blockquote", "pre":
				if attr != "" {
					return fmt.Errorf("attribute on <%s>", name)
				}
			case "code":
				if attr != "" && !(strings.HasPrefix(attr, `class="language-`) && strings.HasSuffix(attr, `"`) && !strings.ContainsAny(attr[16:len(attr)-1], `"<&`)) {
					return fmt.Errorf("bad code attribute %q", attr)
				}
			case "a":
				if !strings.HasPrefix(attr, `href="`) || !strings.HasSuffix(attr, `"`) || strings.ContainsAny(attr[6:len(attr)-1], `"<`) {
					return fmt.Errorf("bad href %q", attr)
				}
			default:
				return fmt.Errorf("tag <%s> not allowed", name)
			}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				if top == "code" || (top == "pre" && name != "code") {
					return fmt.Errorf("<%s> inside <%s>", name, top)
				}
			}
			stack = append(stack, name)
			continue
		}
		i++
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed <%s>", stack[len(stack)-1])
	}
	return nil
}

func FuzzToHTML(f *testing.F) {
	for _, s := range []string{
		"", "**b** _i_ ~~s~~ `c`", "```go\nx\n```", "[a](https://x.y)", "# h\n- b\n> q",
		"***a** b*", "**a *b** c*", "<>&\"", "[x](javascript:1)", "`` ` ``", "\\*x\\*",
		"_a_b_", "*a **b** c*", "```\nunclosed", "[**a**](http://x)", "a\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := ToHTML(md)
		if err := checkTelegramHTML(out); err != nil {
			t.Fatalf("ToHTML(%q) = %q: %v", md, out, err)
		}
	})
}

func BenchmarkToHTML(b *testing.B) {
	md := strings.Repeat("Some **bold** and _italic_ with `code` and [a link](https://example.com).\n- bullet\n\n", 50)
	for b.Loop() {
		ToHTML(md)
	}
}
