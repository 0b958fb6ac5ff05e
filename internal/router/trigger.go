package router

// Whether a message in a non-main group calls the agent.

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// triggerWord returns the default trigger for an assistant name: "@" + name.
func triggerWord(assistantName string) string { return "@" + assistantName }

// containsWord reports whether text contains word (e.g. "@Andy") case-insensitively
// as a whole word: "@Andy," and "hey @andy" match, "@Andybot" and "x@Andy" do not.
func containsWord(text, word string) bool {
	if word == "" {
		return false
	}
	lt, lw := strings.ToLower(text), strings.ToLower(word)
	for from := 0; from <= len(lt)-len(lw); {
		i := strings.Index(lt[from:], lw)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(lw)
		if boundaryBefore(lt, start) && boundaryAfter(lt, end) {
			return true
		}
		_, size := utf8.DecodeRuneInString(lt[start:])
		from = start + size
	}
	return false
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func boundaryBefore(s string, i int) bool {
	if i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return !isWordRune(r) && r != '@'
}

func boundaryAfter(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return !isWordRune(r)
}

// signals are what the Telegram adapter learned about a message besides its text.
type signals struct {
	Text        string
	MentionsBot bool // a mention entity of the bot's @username
	ReplyToBot  bool // a reply to one of the bot's messages
}

// triggered reports whether a non-main group's message triggers the agent: the
// group's trigger word, the bot's @username, or a reply to the bot.
func triggered(s signals, triggerWord, botUsername string) bool {
	if s.MentionsBot || s.ReplyToBot {
		return true
	}
	if containsWord(s.Text, triggerWord) {
		return true
	}
	return botUsername != "" && containsWord(s.Text, "@"+botUsername)
}
