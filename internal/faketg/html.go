//lint:file-ignore ST1005 the error texts are Telegram's own, verbatim, as clients see them

package faketg

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// telegramTags are the tags Telegram's HTML parse mode accepts.
var telegramTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true,
	"a": true, "code": true, "pre": true, "blockquote": true, "tg-emoji": true,
}

// parseHTML checks text the way Telegram's HTML parse mode does and returns the
// visible text (tags removed, entities decoded). Its errors read like Telegram's
// "can't parse entities" details. Like Telegram, an '&' that does not start a known
// entity and a stray '>' are taken literally; a '<' must start a valid tag.
func parseHTML(text string) (string, error) {
	var visible strings.Builder
	var stack []string
	for i := 0; i < len(text); {
		c := text[i]
		switch c {
		case '&':
			if r, n := decodeEntity(text[i:]); n > 0 {
				visible.WriteRune(r)
				i += n
				continue
			}
			visible.WriteByte('&')
			i++
		case '<':
			end := strings.IndexByte(text[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("Unclosed start tag at byte offset %d", i)
			}
			inner := text[i+1 : i+end]
			if strings.HasPrefix(inner, "/") {
				name := strings.ToLower(strings.TrimSpace(inner[1:]))
				if len(stack) == 0 {
					return "", fmt.Errorf("Unexpected end tag at byte offset %d", i)
				}
				if top := stack[len(stack)-1]; top != name {
					return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top, name)
				}
				stack = stack[:len(stack)-1]
				i += end + 1
				continue
			}
			name, attrs := splitTag(inner)
			if !telegramTags[name] {
				return "", fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, i)
			}
			if err := checkAttrs(name, attrs, i); err != nil {
				return "", err
			}
			stack = append(stack, name)
			i += end + 1
		default:
			_, size := utf8.DecodeRuneInString(text[i:])
			visible.WriteString(text[i : i+size])
			i += size
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1])
	}
	return visible.String(), nil
}

func splitTag(inner string) (string, string) {
	inner = strings.TrimSpace(inner)
	name, attrs, _ := strings.Cut(inner, " ")
	return strings.ToLower(name), strings.TrimSpace(attrs)
}

func checkAttrs(name, attrs string, off int) error {
	if attrs == "" {
		if name == "a" {
			return fmt.Errorf("Can't find attribute \"href\" in tag \"a\" at byte offset %d", off)
		}
		return nil
	}
	key, val, ok := strings.Cut(attrs, "=")
	if !ok {
		if name == "blockquote" && attrs == "expandable" {
			return nil
		}
		return fmt.Errorf("Expected equal sign in declaration of an attribute of the tag \"%s\" at byte offset %d", name, off)
	}
	if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') {
		if val[len(val)-1] != val[0] {
			return fmt.Errorf("Unclosed end tag at byte offset %d", off)
		}
		val = val[1 : len(val)-1]
	}
	switch {
	case name == "a" && key == "href":
		if strings.TrimSpace(val) == "" {
			return fmt.Errorf("Wrong HTTP URL at byte offset %d", off)
		}
	case name == "code" && key == "class", name == "span" && key == "class", name == "tg-emoji" && key == "emoji-id":
	default:
		return fmt.Errorf("Unsupported attribute \"%s\" in tag \"%s\" at byte offset %d", key, name, off)
	}
	return nil
}

// decodeEntity decodes a named or numeric HTML entity at the start of s.
func decodeEntity(s string) (rune, int) {
	for name, r := range map[string]rune{"&lt;": '<', "&gt;": '>', "&amp;": '&', "&quot;": '"'} {
		if strings.HasPrefix(s, name) {
			return r, len(name)
		}
	}
	if !strings.HasPrefix(s, "&#") {
		return 0, 0
	}
	semi := strings.IndexByte(s, ';')
	if semi < 3 || semi > 12 {
		return 0, 0
	}
	num := s[2:semi]
	base := 10
	if num[0] == 'x' || num[0] == 'X' {
		num, base = num[1:], 16
	}
	v, err := strconv.ParseUint(num, base, 32)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return 0, 0
	}
	return rune(v), semi + 1
}

// utf16Len counts like Telegram: UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
