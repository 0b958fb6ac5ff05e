package mounts

import (
	"strings"
	"unicode"
)

// Blocked-pattern matching, precisely:
//
//   - A plain pattern applies to single path components. A component matches
//     it when the folded component CONTAINS the folded pattern: ".env" blocks
//     ".env", ".env.local", "prod.env" and ".envrc"; "password" blocks
//     "my-passwords.txt". Over-blocking a few harmless names (".dockerignore")
//     is the price of not missing "credentials.json" or ".secrets".
//   - A pattern starting with '*' is an extension: "*.key" matches a
//     component that ENDS with ".key", or has ".key." in it (a further
//     extension: "server.key.bak", "tls.pem.orig"), but not "my.keyboard".
//   - A pattern with '/' names consecutive components, each matched as
//     above: ".config/gh/hosts.yml" matches that file wherever it lies
//     ("/home/u/.config/gh/hosts.yml", and "hosts.yml" inside a mount of
//     "/home/u/.config/gh").
//   - Folding: Unicode format characters (zero-width space, soft hyphen …) and
//     combining marks are dropped; fullwidth ASCII (U+FF01–FF5E) maps to
//     ASCII; common look-alikes of '.' and of the Latin letters (Cyrillic,
//     Greek, dotless i, long s, Kelvin sign …) map to ASCII; then everything
//     is lower-cased. So ".SSH", "．ｓｓｈ" and ".ѕѕһ" (Cyrillic) all match ".ssh".
//     The fold is a fixed table, not full Unicode confusables detection: an
//     exotic look-alike not in it does not match. Such a name is a different
//     file on Linux anyway; the fold is defence in depth against names that
//     other tools or filesystems may treat as the real one.

// fold maps s to the form blocked patterns are compared in.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Mn, r), unicode.Is(unicode.Me, r):
			continue
		case r >= 0xFF01 && r <= 0xFF5E: // fullwidth ASCII
			r -= 0xFEE0
		default:
			if m, ok := lookalike[r]; ok {
				r = m
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// lookalike maps characters that render like ASCII to that ASCII character.
var lookalike = map[rune]rune{
	// dots
	'\u2024': '.', // one dot leader
	'\uFE52': '.', // small full stop
	'\u3002': '.', // ideographic full stop
	'\uFF61': '.', // halfwidth ideographic full stop
	'\u0701': '.', // syriac supralinear full stop
	'\u0702': '.', // syriac sublinear full stop
	'\uA4F8': '.', // lisu letter tone mya ti
	'\u2E31': '.', // word separator middle dot
	'\u00B7': '.', // middle dot
	'\u2219': '.', // bullet operator
	'\u22C5': '.', // dot operator
	// hyphens and underscores
	'\u2010': '-', '\u2011': '-', '\u2012': '-', '\u2013': '-', '\u2212': '-',
	'\uFE58': '-', '\uFE63': '-',
	'\uFE4D': '_', '\uFE4E': '_', '\uFE4F': '_',
	// Cyrillic
	'\u0430': 'a', '\u0410': 'a', '\u0432': 'b', '\u0412': 'b', '\u0441': 'c', '\u0421': 'c',
	'\u0501': 'd', '\u0435': 'e', '\u0415': 'e', '\u04BB': 'h', '\u041D': 'h',
	'\u0456': 'i', '\u0406': 'i', '\u04CF': 'i', '\u0458': 'j', '\u0408': 'j',
	'\u043A': 'k', '\u041A': 'k', '\u041C': 'm', '\u043E': 'o', '\u041E': 'o',
	'\u0440': 'p', '\u0420': 'p', '\u051B': 'q', '\u0455': 's', '\u0405': 's',
	'\u0422': 't', '\u0475': 'v', '\u0474': 'v', '\u051D': 'w', '\u0445': 'x', '\u0425': 'x',
	'\u0443': 'y', '\u04AF': 'y', '\u04AE': 'y', '\u0500': 'd',
	// Greek
	'\u03B1': 'a', '\u0391': 'a', '\u0392': 'b', '\u03B5': 'e', '\u0395': 'e', '\u0396': 'z',
	'\u0397': 'h', '\u03B9': 'i', '\u0399': 'i', '\u03BA': 'k', '\u039A': 'k', '\u039C': 'm',
	'\u03BD': 'v', '\u039D': 'n', '\u03BF': 'o', '\u039F': 'o', '\u03C1': 'p', '\u03A1': 'p',
	'\u03C4': 't', '\u03A4': 't', '\u03C5': 'u', '\u03A5': 'y', '\u03C7': 'x', '\u03A7': 'x',
	'\u03F2': 'c', '\u03F9': 'c', '\u03F3': 'j',
	// Latin variants
	'\u0131': 'i', // dotless i
	'\u017F': 's', // long s
	'\u212A': 'k', // kelvin sign
	'\u0261': 'g', // script g
	'\u0251': 'a', // latin alpha
	'\u1D00': 'a', '\u0299': 'b', '\u1D04': 'c', '\u1D05': 'd', '\u1D07': 'e',
	'\u0262': 'g', '\u029C': 'h', '\u026A': 'i', '\u1D0A': 'j', '\u1D0B': 'k',
	'\u029F': 'l', '\u1D0D': 'm', '\u0274': 'n', '\u1D0F': 'o', '\u1D18': 'p',
	'\u0280': 'r', '\uA731': 's', '\u1D1B': 't', '\u1D1C': 'u', '\u1D20': 'v',
	'\u1D21': 'w', '\u028F': 'y', '\u1D22': 'z',
}

// pattern is a blocked pattern split into folded components.
type pattern struct {
	text  string   // folded, as written (for messages)
	parts []string // one per component; a leading '*' marks an extension
}

func parsePattern(p string) pattern {
	f := fold(p)
	return pattern{text: f, parts: strings.Split(f, "/")}
}

// matchPart reports whether one folded component matches one pattern part.
func matchPart(c, part string) bool {
	if ext, ok := strings.CutPrefix(part, "*"); ok {
		return strings.HasSuffix(c, ext) || strings.Contains(c, ext+".")
	}
	return strings.Contains(c, part)
}

// patterns returns the patterns to check: the defaults plus the file's.
func (a Allowlist) patterns() []pattern {
	out := make([]pattern, 0, len(DefaultBlocked)+len(a.Blocked))
	for _, p := range DefaultBlocked {
		out = append(out, parsePattern(p))
	}
	for _, p := range a.Blocked {
		if fold(p) != "" {
			out = append(out, parsePattern(p))
		}
	}
	return out
}

// blockedTail returns the pattern that matches the path's last components
// (folded, in order), if any: a single-component pattern the last name, a
// multi-component one the names that end the path.
func blockedTail(folded []string, ps []pattern) (string, bool) {
	for _, p := range ps {
		n := len(p.parts)
		if n > len(folded) {
			continue
		}
		tail := folded[len(folded)-n:]
		hit := true
		for i, part := range p.parts {
			if !matchPart(tail[i], part) {
				hit = false
				break
			}
		}
		if hit {
			return p.text, true
		}
	}
	return "", false
}

// blockedComponent checks every component of path (absolute or relative,
// as written or resolved), and every run of components for multi-component
// patterns; "", "." and ".." are not names and are skipped. It returns the
// component (the last of the run) that completes a match.
func blockedComponent(path string, ps []pattern) (component, pat string, ok bool) {
	var folded []string
	for _, c := range strings.Split(path, "/") {
		if c == "" || c == "." || c == ".." {
			continue
		}
		folded = append(folded, fold(c))
		if p, hit := blockedTail(folded, ps); hit {
			return c, p, true
		}
	}
	return "", "", false
}

// foldPath folds the names of path, skipping "", "." and "..".
func foldPath(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." && c != ".." {
			out = append(out, fold(c))
		}
	}
	return out
}
