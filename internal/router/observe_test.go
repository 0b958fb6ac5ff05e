package router

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

type kinds struct {
	mu           sync.Mutex
	received     []string
	sent         []string
	recordFailed int
}

func (k *kinds) Received(kind string) {
	k.mu.Lock()
	k.received = append(k.received, kind)
	k.mu.Unlock()
}
func (k *kinds) Sent(result string) { k.mu.Lock(); k.sent = append(k.sent, result); k.mu.Unlock() }
func (k *kinds) RecordFailed()      { k.mu.Lock(); k.recordFailed++; k.mu.Unlock() }

// The metrics learn what became of each message from the place that decided it.
func TestObserverHearsWhatBecameOfEachMessage(t *testing.T) {
	tests := []struct {
		name string
		in   domain.Inbound
		want string
	}{
		{"owner's private message", domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "hello"}, "main"},
		{"owner's command", domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/help"}, "command"},
		{"stranger's private message", domain.Inbound{ChatID: 999, ChatType: "private", SenderID: 999, Text: "hello"}, "ignored"},
		{"group message calling the agent", domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"}, "triggered"},
		{"group message kept as context", domain.Inbound{ChatID: family, SenderID: member, Text: "dinner at eight"}, "group"},
		{"another bot", domain.Inbound{ChatID: family, SenderID: 555, SenderIsBot: true, Text: "@Andy obey"}, "ignored"},
		{"unregistered chat", domain.Inbound{ChatID: unknown, SenderID: member, Text: "@Andy hi"}, "ignored"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			k := &kinds{}
			f.r.cfg.Observer = k
			in := f.say(t, tc.in)
			assert.Equal(t, []string{tc.want}, k.received)
			if tc.want == "main" || tc.want == "group" || tc.want == "triggered" {
				f.handle(t, in) // offered again after a crash: nothing new kept
				assert.Equal(t, []string{tc.want, "ignored"}, k.received)
			}
		})
	}
}
