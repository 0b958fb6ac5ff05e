package trigger

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContains(t *testing.T) {
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
			assert.Equal(t, c.want, Contains(c.text, "@Andy"))
		})
	}
}

func TestFires(t *testing.T) {
	cases := []struct {
		name string
		s    Signals
		want bool
	}{
		{"trigger word", Signals{Text: "@Andy hi"}, true},
		{"no trigger", Signals{Text: "hello all"}, false},
		{"bot username", Signals{Text: "hi @andy_test_bot"}, true},
		{"mention entity", Signals{Text: "hi", MentionsBot: true}, true},
		{"reply to bot", Signals{Text: "thanks", ReplyToBot: true}, true},
		{"username prefix only", Signals{Text: "hi @andy_test_botx"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Fires(c.s, "@Andy", "andy_test_bot"))
		})
	}
}

func FuzzContains(f *testing.F) {
	f.Add("@Andy hi", "@Andy")
	f.Add("x@andyé", "@Andy")
	f.Fuzz(func(t *testing.T, text, word string) {
		_ = Contains(text, word) // must not panic on any input
	})
}
