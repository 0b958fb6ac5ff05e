package agent

import "strings"

const (
	openInternal  = "<internal>"
	closeInternal = "</internal>"
)

// StripInternal removes every <internal>…</internal> span (tags matched
// case-insensitively), an unclosed <internal> up to the end, and stray closing
// tags, then trims white space: the private part never reaches the chat.
func StripInternal(s string) string {
	var out strings.Builder
	for {
		i := indexASCIIFold(s, openInternal)
		if i < 0 {
			break
		}
		out.WriteString(s[:i])
		rest := s[i+len(openInternal):]
		j := indexASCIIFold(rest, closeInternal)
		if j < 0 {
			s = ""
			break
		}
		s = rest[j+len(closeInternal):]
	}
	out.WriteString(s)
	res := out.String()
	for {
		i := indexASCIIFold(res, closeInternal)
		if i < 0 {
			break
		}
		res = res[:i] + res[i+len(closeInternal):]
	}
	return strings.TrimSpace(res)
}

// indexASCIIFold is strings.Index ignoring ASCII case; sub must be ASCII.
// Byte offsets stay those of s (strings.ToLower could change lengths).
func indexASCIIFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		match := true
		for k := 0; k < n; k++ {
			c := s[i+k]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[k] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}
