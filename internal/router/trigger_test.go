package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContainsWord(t *testing.T) {
	cases := []struct {
		text string
		want bool
	}{
		{"@Andy what's up", true},
		{"@Andy, hello", true},
		{"hey @andy", true},
		{"HEY @ANDY!", true},
		{"(@Andy)", true},
		{"@Andy\nnext line", true},
		{"@Andybot hello", false},
		{"@Andy_ hello", false},
		{"mail@Andy.com", false},
		{"@@Andy", false},
		{"Andy hello", false},
		{"", false},
		{"@Andyé", false},
		{"@Andybot and then @Andy.", true},
		{"ü@Andy", false},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			assert.Equal(t, c.want, containsWord(c.text, "@Andy"))
		})
	}
}

func TestTriggered(t *testing.T) {
	cases := []struct {
		name string
		s    signals
		want bool
	}{
		{"trigger word", signals{Text: "@Andy hi"}, true},
		{"no trigger", signals{Text: "hello all"}, false},
		{"bot username", signals{Text: "hi @andy_test_bot"}, true},
		{"mention entity", signals{Text: "hi", MentionsBot: true}, true},
		{"reply to bot", signals{Text: "thanks", ReplyToBot: true}, true},
		{"username prefix only", signals{Text: "hi @andy_test_botx"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, triggered(c.s, "@Andy", "andy_test_bot"))
		})
	}
}

func FuzzContainsWord(f *testing.F) {
	f.Add("@Andy hi", "@Andy")
	f.Add("x@andyé", "@Andy")
	f.Fuzz(func(t *testing.T, text, word string) {
		_ = containsWord(text, word) // must not panic on any input
	})
}
