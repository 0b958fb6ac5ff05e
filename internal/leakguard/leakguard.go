// Package leakguard finds the host's secrets in what leaves through the host
// (DESIGN.md, "Credentials for outside services", leak guard): chat text,
// bridge tool output, egress requests. Each secret is looked for as it is
// and as its hex, URL and base64 encodings (every alignment of base64, both
// alphabets), all in one Aho–Corasick scan of the text. Pure: the caller
// says what the secrets are and what to do about a find.
package leakguard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// Redacted replaces a secret in text.
const Redacted = "[redacted]"

// MinLen is the shortest secret looked for: a shorter value (a port, "UTC",
// "true" in a tool's env) is not a secret anyone could tell from text, and
// looking for it would redact ordinary words.
const MinLen = 8

// Secret is one value the host holds, named for the audit log (the
// variable it came from); the name is not secret, the value is.
type Secret struct {
	Name  string
	Value string
}

// Guard looks for a set of secrets. Its set may change while it is in use
// (Set, Refresh): a scan uses the set as it was when the scan began. The
// zero Guard and a nil *Guard find nothing.
type Guard struct {
	m   atomic.Pointer[matcher]
	src func() []Secret // nil: only Set changes the set

	mu    sync.Mutex // guards known
	known []Secret   // every secret src gave so far
}

// NewFrom is a guard of the secrets src gives now and at each Refresh:
// where they come from (files that an owner edits) is the caller's.
func NewFrom(src func() []Secret) *Guard {
	g := &Guard{src: src}
	g.Refresh()
	return g
}

// Refresh reads the guard's source again and adds what it gives to the
// secrets looked for. A secret once known stays looked for (a profile
// removed from its file may still have a run going that used it).
func (g *Guard) Refresh() {
	if g == nil || g.src == nil {
		return
	}
	fresh := g.src()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range fresh {
		s.Value = strings.TrimSpace(s.Value)
		if len(s.Value) >= MinLen && !slices.Contains(g.known, s) {
			g.known = append(g.known, s)
		}
	}
	g.Set(g.known)
}

// New is a guard for secrets.
func New(secrets ...Secret) *Guard {
	g := &Guard{}
	g.Set(secrets)
	return g
}

// Set replaces the secrets looked for; the automaton is rebuilt only when
// the set changed.
func (g *Guard) Set(secrets []Secret) {
	key := setKey(secrets)
	if m := g.m.Load(); m != nil && m.key == key {
		return
	}
	g.m.Store(build(secrets, key))
}

func (g *Guard) matcher() *matcher {
	if g == nil {
		return nil
	}
	return g.m.Load()
}

// Find is what a scan found: which secrets (by name) in which encodings.
type Find struct {
	Count     int      // places (occurrences that overlap are one)
	Names     []string // secrets found, sorted, each once
	Encodings []string // "plain", "hex", "url", "base64", sorted, each once
}

// Found reports whether anything was found.
func (f Find) Found() bool { return f.Count > 0 }

// String says what was found, never the value: "2 secrets (BOT_TOKEN;
// base64, plain)".
func (f Find) String() string {
	if f.Count == 0 {
		return "no secret"
	}
	what := "secret"
	if f.Count > 1 {
		what = "secrets"
	}
	return strconv.Itoa(f.Count) + " " + what + " (" + strings.Join(f.Names, ", ") + "; " + strings.Join(f.Encodings, ", ") + ")"
}

// Redact replaces every secret in s with Redacted.
func (g *Guard) Redact(s string) (string, Find) {
	m := g.matcher()
	if m == nil || len(s) == 0 {
		return s, Find{}
	}
	spans, f := m.find([]byte(s))
	if len(spans) == 0 {
		return s, f
	}
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp[0]])
		b.WriteString(Redacted)
		at = sp[1]
	}
	b.WriteString(s[at:])
	return b.String(), f
}

// Scan reports what of the secrets p holds, changing nothing.
func (g *Guard) Scan(p []byte) Find {
	m := g.matcher()
	if m == nil {
		return Find{}
	}
	_, f := m.find(p)
	return f
}

// Pending is the length of the longest end of s that is the start of
// something looked for: text that is still growing (a live draft) shows s
// without it, so that no secret is shown piece by piece before it is whole.
func (g *Guard) Pending(s string) int {
	m := g.matcher()
	if m == nil || s == "" {
		return 0
	}
	best := 0
	last := s[len(s)-1]
	for _, p := range m.patterns {
		for k := min(len(p)-1, len(s)); k > best; k-- {
			if p[k-1] == last && s[len(s)-k:] == p[:k] {
				best = k
				break
			}
		}
	}
	return best
}

// ErrSecret is a stream (Reader) that carried a secret.
var ErrSecret = errors.New("a secret of the host's is in the data")

// Reader passes r on, scanning it as it goes: once a secret (in any of its
// forms) is seen, Read fails with an error wrapping ErrSecret, and no byte
// of that occurrence has been passed on (the last bytes read are held back
// until what follows them is known). A nil or empty guard passes r as it is.
func (g *Guard) Reader(r io.Reader) io.Reader {
	m := g.matcher()
	if m == nil {
		return r
	}
	return &reader{m: m, r: r}
}

// reader is Guard.Reader.
type reader struct {
	m    *matcher
	r    io.Reader
	held []byte // scanned, not yet passed on: the start of an occurrence may be in it
	out  []byte // scanned and free to pass on
	err  error  // sticky: ErrSecret, or r's error once out and held are given
	buf  []byte
}

// readChunk bounds one read from the underlying stream.
const readChunk = 32 << 10

func (r *reader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, readChunk)
		}
		n, err := r.r.Read(r.buf)
		window := append(r.held, r.buf[:n]...)
		if n > 0 || err != nil {
			if f := r.m.findFirst(window); f != "" {
				r.err = &secretError{how: f}
				r.held, r.out = nil, nil
				return 0, r.err
			}
		}
		keep := r.m.maxLen - 1
		if err != nil {
			keep = 0
			r.err = err
		}
		cut := max(len(window)-keep, 0)
		r.out = append(r.out[:0], window[:cut]...)
		r.held = append(r.held[:0:0], window[cut:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// secretError is ErrSecret with the secret's name and encoding.
type secretError struct{ how string }

func (e *secretError) Error() string { return "a secret of the host's (" + e.how + ") is in the data" }
func (e *secretError) Is(target error) bool {
	return target == ErrSecret
}

// How names the secret and its encoding an error of Reader's carries
// ("GITHUB_TOKEN, base64"), never its value.
func How(err error) string {
	if se, ok := errors.AsType[*secretError](err); ok {
		return se.how
	}
	return "a secret of the host's"
}

// matcher is one set of secrets, built.
type matcher struct {
	key      [32]byte
	ac       ahocorasick.AhoCorasick
	patterns []string
	origin   []origin // of patterns[i]
	maxLen   int
}

type origin struct{ name, encoding string }

func setKey(secrets []Secret) [32]byte {
	vs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		vs = append(vs, s.Name+"\x00"+strings.TrimSpace(s.Value))
	}
	slices.Sort(vs)
	return sha256.Sum256([]byte(strings.Join(vs, "\x00\x00")))
}

// build makes the automaton of every form of every secret; nil when none
// is long enough to look for.
func build(secrets []Secret, key [32]byte) *matcher {
	m := &matcher{key: key}
	seen := map[string]bool{}
	add := func(p string, o origin) {
		if len(p) < MinLen/2 || seen[p] {
			return
		}
		seen[p] = true
		m.patterns = append(m.patterns, p)
		m.origin = append(m.origin, o)
		m.maxLen = max(m.maxLen, len(p))
	}
	for _, s := range secrets {
		v := strings.TrimSpace(s.Value)
		if len(v) < MinLen {
			continue
		}
		for _, f := range forms(v) {
			add(f.text, origin{s.Name, f.encoding})
		}
	}
	if len(m.patterns) == 0 {
		return &matcher{key: key}
	}
	b := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{MatchKind: ahocorasick.LeftMostLongestMatch, DFA: true})
	m.ac = b.Build(m.patterns)
	return m
}

type form struct{ text, encoding string }

// forms are the texts v may appear as: itself, hex in either case, URL
// escaping (query and path; upper- and lower-case escapes), and base64 in
// both alphabets at each of the three alignments v may start at in a
// longer encoded text. For base64 only the characters made of v's bits
// alone are kept: those at either end also carry bits of whatever v was
// next to.
func forms(v string) []form {
	out := []form{{v, "plain"}}
	h := hex.EncodeToString([]byte(v))
	out = append(out, form{h, "hex"}, form{strings.ToUpper(h), "hex"})
	for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		if e != v {
			out = append(out, form{e, "url"}, form{lowerEscapes(e), "url"})
		}
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := range 3 {
			out = append(out, form{base64Core(enc, v, k), "base64"})
		}
	}
	return out
}

// base64Core is the part of the base64 encoding of v, preceded by k bytes
// of anything, that depends on v alone.
func base64Core(enc *base64.Encoding, v string, k int) string {
	s := enc.EncodeToString(append(make([]byte, k), v...))
	drop := [3]int{0, 2, 3}[k] // characters carrying bits of the k bytes before
	s = s[drop:]
	if (k+len(v))%3 != 0 {
		s = s[:len(s)-1] // the last character carries bits of what follows
	}
	return s
}

// lowerEscapes writes the hex digits of %XX escapes in lower case.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
		}
	}
	return string(b)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// find lists the spans of every occurrence in p, merged where they touch
// or overlap, and what they were.
func (m *matcher) find(p []byte) ([][2]int, Find) {
	var f Find
	if len(m.patterns) == 0 {
		return nil, f
	}
	var spans [][2]int
	it := m.ac.IterByte(p)
	for x := it.Next(); x != nil; x = it.Next() {
		o := m.origin[x.Pattern()]
		f.Names = appendOnce(f.Names, o.name)
		f.Encodings = appendOnce(f.Encodings, o.encoding)
		s, e := x.Start(), x.End()
		if n := len(spans); n > 0 && s <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], e)
			continue
		}
		spans = append(spans, [2]int{s, e})
	}
	f.Count = len(spans)
	slices.Sort(f.Names)
	slices.Sort(f.Encodings)
	return spans, f
}

// findFirst names the first secret in p and its encoding, or "".
func (m *matcher) findFirst(p []byte) string {
	if len(m.patterns) == 0 {
		return ""
	}
	x := m.ac.IterByte(p).Next()
	if x == nil {
		return ""
	}
	o := m.origin[x.Pattern()]
	return o.name + ", " + o.encoding
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Contains reports whether p holds any secret.
func (g *Guard) Contains(p []byte) bool {
	m := g.matcher()
	return m != nil && m.findFirst(p) != ""
}
