package leakguard

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "123456789:AAHfake-bot_token+with/odd=chars"

func guard() *Guard {
	return New(Secret{"TELEGRAM_BOT_TOKEN", token}, Secret{"GITHUB_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ"})
}

// Every encoding the guard promises, at every place a secret may sit in a
// longer encoded text, is redacted, and nothing else is.
func TestRedactsEveryForm(t *testing.T) {
	g := guard()
	var cases []string
	cases = append(cases, token, hex.EncodeToString([]byte(token)), strings.ToUpper(hex.EncodeToString([]byte(token))),
		url.QueryEscape(token), url.PathEscape(token),
		regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(token), strings.ToLower))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		for pre := range 5 {
			for post := range 4 {
				data := []byte(strings.Repeat("p", pre) + token + strings.Repeat("q", post))
				cases = append(cases, enc.EncodeToString(data))
			}
		}
	}
	for _, c := range cases {
		text := "look: " + c + " there"
		out, f := g.Redact(text)
		assert.True(t, f.Found(), "not found in %q", text)
		assert.Contains(t, out, Redacted, c)
		assert.True(t, strings.HasPrefix(out, "look: "), out)
		assert.True(t, strings.HasSuffix(out, " there"), out)
		assert.NotContains(t, out, token)
		assert.Equal(t, []string{"TELEGRAM_BOT_TOKEN"}, f.Names)
		assert.NotContains(t, f.String(), token)
	}
}

func TestRedactLeavesOtherTextAlone(t *testing.T) {
	g := guard()
	for _, s := range []string{"", "hello", "123456789:", strings.Repeat("A", 5000), "ghp_0123456789abcdefghijABCDEFGHI"} {
		out, f := g.Redact(s)
		assert.Equal(t, s, out)
		assert.False(t, f.Found())
	}
}

func TestRedactSeveral(t *testing.T) {
	g := guard()
	text := "a " + token + " b ghp_0123456789abcdefghijABCDEFGHIJ c " + base64.StdEncoding.EncodeToString([]byte(token))
	out, f := g.Redact(text)
	assert.Equal(t, "a [redacted] b [redacted] c [redacted]", out)
	assert.Equal(t, 3, f.Count)
	assert.Equal(t, []string{"GITHUB_TOKEN", "TELEGRAM_BOT_TOKEN"}, f.Names)
	assert.Equal(t, []string{"base64", "plain"}, f.Encodings)
	assert.Equal(t, "3 secrets (GITHUB_TOKEN, TELEGRAM_BOT_TOKEN; base64, plain)", f.String())
}

func TestShortValuesAreNotSecrets(t *testing.T) {
	g := New(Secret{"TZ", "UTC"}, Secret{"PORT", "8443"}, Secret{"EMPTY", ""}, Secret{"SPACES", "   x   "})
	out, f := g.Redact("UTC 8443 x")
	assert.Equal(t, "UTC 8443 x", out)
	assert.False(t, f.Found())
	var nilGuard *Guard
	out, f = nilGuard.Redact(token)
	assert.Equal(t, token, out)
	assert.False(t, f.Found())
	assert.False(t, nilGuard.Contains([]byte(token)))
	assert.Equal(t, 0, nilGuard.Pending(token[:5]))
}

// A value is looked for without the spaces around it (an env file's
// trailing newline).
func TestValueTrimmed(t *testing.T) {
	g := New(Secret{"K", "  supersecretvalue\n"})
	_, f := g.Redact("x supersecretvalue y")
	assert.True(t, f.Found())
}

func TestSetReplaces(t *testing.T) {
	g := New(Secret{"A", "aaaaaaaaaaaa"})
	assert.True(t, g.Contains([]byte("aaaaaaaaaaaa")))
	m := g.matcher()
	g.Set([]Secret{{"A", "aaaaaaaaaaaa"}})
	assert.Same(t, m, g.matcher(), "same set, no rebuild")
	g.Set([]Secret{{"B", "bbbbbbbbbbbb"}})
	assert.False(t, g.Contains([]byte("aaaaaaaaaaaa")))
	assert.True(t, g.Contains([]byte("bbbbbbbbbbbb")))
	g.Set(nil)
	assert.False(t, g.Contains([]byte("bbbbbbbbbbbb")))
}

func TestPending(t *testing.T) {
	g := guard()
	assert.Equal(t, 0, g.Pending("hello"))
	assert.Equal(t, 9, g.Pending("the token is 123456789"))
	assert.Equal(t, 11, g.Pending("the token is 123456789:A"))
	assert.Equal(t, 0, g.Pending("the token is "+token), "a whole secret is Redact's")
	// Every prefix of a growing text that holds a secret, shown without its
	// pending end and redacted, never shows more of the secret than the
	// redaction leaves.
	text := "here: " + token + " and more"
	for i := range len(text) + 1 {
		s := text[:i]
		shown, _ := g.Redact(s[:len(s)-g.Pending(s)])
		assert.NotContains(t, shown, token[:3], "prefix %d shows %q", i, shown)
	}
}

// A stream is cut before any byte of a secret passes, whatever the sizes
// of the reads that bring it.
func TestReaderStopsBeforeTheSecret(t *testing.T) {
	g := guard()
	for _, enc := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return base64.StdEncoding.EncodeToString([]byte("xy" + s)) },
		func(s string) string { return hex.EncodeToString([]byte(s)) },
	} {
		body := strings.Repeat("a", 70000) + enc(token) + "tail"
		for _, wrap := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader, func(r io.Reader) io.Reader { return r }} {
			var got bytes.Buffer
			_, err := io.Copy(&got, g.Reader(wrap(strings.NewReader(body))))
			require.ErrorIs(t, err, ErrSecret)
			assert.NotContains(t, err.Error(), token)
			assert.Contains(t, err.Error(), "TELEGRAM_BOT_TOKEN")
			assert.True(t, strings.HasPrefix(body, got.String()))
			assert.LessOrEqual(t, got.Len(), 70000, "nothing of the secret passed")
		}
	}
}

func TestReaderPassesCleanStreams(t *testing.T) {
	g := guard()
	body := strings.Repeat("0123456789", 20000)
	for _, wrap := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader} {
		got, err := io.ReadAll(g.Reader(wrap(strings.NewReader(body))))
		require.NoError(t, err)
		assert.Equal(t, body, string(got))
	}
	boom := errors.New("boom")
	_, err := io.ReadAll(g.Reader(iotest.ErrReader(boom)))
	assert.ErrorIs(t, err, boom)
	var nilGuard *Guard
	r := strings.NewReader("x")
	assert.Same(t, io.Reader(r), nilGuard.Reader(r))
}

// One guard is scanned from many goroutines while its set changes.
func TestConcurrentUse(t *testing.T) {
	g := guard()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				out, _ := g.Redact("x " + token + " y")
				assert.NotContains(t, out, token)
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			g.Set([]Secret{{"TELEGRAM_BOT_TOKEN", token}, {"X", strings.Repeat("z", 8+i)}})
		}
	})
	wg.Wait()
}

// FuzzRedact: whatever surrounds a secret, in whatever form among the
// promised ones, Redact removes it and says so; text without one comes
// back unchanged.
func FuzzRedact(f *testing.F) {
	f.Add("prefix", "suffix", "s3cr3t-value-123", uint8(0), uint8(0))
	f.Add("", "", "\x00\xffbinary!!", uint8(3), uint8(2))
	f.Add("aaaa", "bbbbb", "ééééé-unicode", uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, pre, post, secret string, how, align uint8) {
		if len(strings.TrimSpace(secret)) < MinLen || len(secret) > 256 || len(pre)+len(post) > 4096 {
			return
		}
		secret = strings.TrimSpace(secret)
		g := New(Secret{"S", secret})
		pad := strings.Repeat("\x01", int(align%3))
		var text string
		switch how % 5 {
		case 0:
			text = pre + secret + post
		case 1:
			text = pre + hex.EncodeToString([]byte(secret)) + post
		case 2:
			text = pre + url.QueryEscape(secret) + post
		case 3:
			text = base64.StdEncoding.EncodeToString([]byte(pad + pre + secret + post))
		case 4:
			text = base64.RawURLEncoding.EncodeToString([]byte(pad + pre + secret + post))
		}
		out, f := g.Redact(text)
		if !f.Found() {
			t.Fatalf("form %d of %q not found in %q", how%5, secret, text)
		}
		if how%5 == 0 && strings.Contains(out, secret) {
			t.Fatalf("secret left in %q", out)
		}
		if g.Contains([]byte(out)) {
			t.Fatalf("redacted text %q still holds a secret", out)
		}
		clean := strings.ReplaceAll(pre+post, secret, "")
		if g.Contains([]byte(clean)) {
			return // an encoding of the secret can occur by chance in pre+post
		}
		if got, f := g.Redact(clean); got != clean || f.Found() {
			t.Fatalf("clean text %q changed to %q", clean, got)
		}
	})
}

// BenchmarkRedact4KiB is the cost of the guard on one chat message of
// 4 KiB (the target is 20 µs), with the secrets of a typical host: two
// model keys, the bot token, three credentials, four tool variables.
func BenchmarkRedact4KiB(b *testing.B) {
	g := New(benchSecrets()...)
	text := benchText(4096)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if _, f := g.Redact(text); f.Found() {
			b.Fatal("found a secret in clean text")
		}
	}
}

func BenchmarkReader1MiB(b *testing.B) {
	g := New(benchSecrets()...)
	text := benchText(1 << 20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, g.Reader(strings.NewReader(text))); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSecrets() []Secret {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) string {
		const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		b := make([]byte, n)
		for i := range b {
			b[i] = abc[r.IntN(len(abc))]
		}
		return string(b)
	}
	return []Secret{
		{"ANTHROPIC_API_KEY", "sk-ant-api03-" + rnd(95)}, {"OPENAI_API_KEY", "sk-proj-" + rnd(156)},
		{"TELEGRAM_BOT_TOKEN", "7123456789:" + rnd(35)},
		{"GITHUB_TOKEN", "ghp_" + rnd(36)}, {"SEARCH_KEY", rnd(32)}, {"COMPANY_TOKEN", rnd(64)},
		{"BRAVE_API_KEY", rnd(31)}, {"CAL_PASSWORD", rnd(20)}, {"SMTP_PASSWORD", rnd(16)}, {"WEBHOOK", "https://hooks.example.com/" + rnd(40)},
	}
}

// benchText is chat-like text: words, punctuation, a URL, some code.
func benchText(n int) string {
	const para = "Here is the summary you asked for. The build at https://ci.example.org/job/1234 passed; " +
		"`go test ./...` took 41s. Next: review PR #88 (refactor of the egress proxy), then reply to Anna. "
	return strings.Repeat(para, n/len(para)+1)[:n]
}

// Refresh adds what the source gives now; what it gave before stays.
func TestRefreshKeepsWhatWasKnown(t *testing.T) {
	now := []Secret{{"A", "aaaaaaaaaaaa"}}
	g := NewFrom(func() []Secret { return now })
	assert.True(t, g.Contains([]byte("aaaaaaaaaaaa")))
	now = []Secret{{"B", "bbbbbbbbbbbb"}, {"SHORT", "x"}}
	assert.False(t, g.Contains([]byte("bbbbbbbbbbbb")), "read at Refresh only")
	g.Refresh()
	assert.True(t, g.Contains([]byte("bbbbbbbbbbbb")))
	assert.True(t, g.Contains([]byte("aaaaaaaaaaaa")), "a secret once known stays")
	m := g.matcher()
	g.Refresh()
	assert.Same(t, m, g.matcher(), "nothing new, no rebuild")
	var nilGuard *Guard
	nilGuard.Refresh()
}
