package approval

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestInert(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode 日本": "plain text, ünïcode 日本",
		"<b>&amp;</b>":           "&lt;b&gt;&amp;amp;&lt;/b&gt;",
		"a\u202eb\u2066c\u2069":  `a\u202eb\u2066c\u2069`,
		"zero\u200bwidth\ufeff":  `zero\u200bwidth\ufeff`,
		"line\nbreak\u2028sep":   `line\u000abreak\u2028sep`,
		"nb\u00a0sp\u3000":       `nb\u00a0sp\u3000`,
		"esc\x1b[2J":             `esc\u001b[2J`,
		"bad\xffutf8":            `bad\xffutf8`,
		"filler\u3164":           `filler\u3164`,
		"private\U000F0000":      `private\U000f0000`,
		"unassigned\U0001FFFE":   `unassigned\U0001fffe`,
	} {
		assert.Equal(t, want, Inert(in), "%q", in)
	}
}

// Whatever it is given, Inert's output is valid UTF-8 with nothing hidden
// in it and no HTML of its own.
func FuzzInert(f *testing.F) {
	for _, s := range []string{"a\u202eb", "<x>", "\x00\xff", "\u2066\u200d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Inert(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", s)
		}
		for _, r := range out {
			if hidden(r) {
				t.Fatalf("%q left %U in %q", s, r, out)
			}
		}
		if strings.ContainsAny(out, "<>\"") {
			t.Fatalf("HTML left in %q", out)
		}
	})
}

func FuzzParseData(f *testing.F) {
	f.Add(data(strings.Repeat("0a", 16), choiceOnce))
	f.Add("ap::o")
	f.Add("ap:" + strings.Repeat("A", 32) + ":g")
	f.Fuzz(func(t *testing.T, s string) {
		id, choice, ok := parseData(s)
		if !ok {
			return
		}
		if data(id, choice) != s || len(id) != 32 {
			t.Fatalf("%q read as %q, %q", s, id, choice)
		}
	})
}
