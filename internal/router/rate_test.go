package router

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

// triggered lists, in order, whether each stored message of chat called
// the agent.
func (f *fixture) triggers(t *testing.T, chat int64) []bool {
	t.Helper()
	var out []bool
	for _, m := range f.stored(t, chat) {
		out = append(out, m.Triggered)
	}
	return out
}

// The 21st call of one member within the hour (the default rate, 20/h) is
// stored as context and calls nothing; the group is told once, in the
// host's words; another member and the owner still call the agent; an
// hour after the first call the member is answered again.
func TestSenderRate(t *testing.T) {
	f := newFixture(t, "", func(c *Config) { c.SenderRate = 20 })
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	for i := range 22 {
		f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: fmt.Sprintf("@Andy call %d", i+1), Time: start.Add(time.Duration(i) * time.Minute)})
	}
	got := f.triggers(t, family)
	require.Len(t, got, 22, "every call is stored")
	for i, fired := range got {
		assert.Equal(t, i < 20, fired, "call %d", i+1)
	}
	notice := f.outbox(t, family)
	require.Len(t, notice, 1, "told once")
	assert.Contains(t, notice[0], "called me 20 times within the hour")
	assert.NotContains(t, notice[0], "user 7", "no names, no ids: the host's words")
	require.Len(t, f.audited(t, "rate", "deny"), 1)

	f.say(t, domain.Inbound{ChatID: family, SenderID: other, Text: "@Andy my turn", Time: start.Add(25 * time.Minute)})
	f.say(t, domain.Inbound{ChatID: family, SenderID: owner, Text: "@Andy mine too", Time: start.Add(26 * time.Minute)})
	got = f.triggers(t, family)
	assert.Equal(t, []bool{true, true}, got[22:], "other members and the owner are answered")

	// An hour after the first call, one call has left the window.
	f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy back", Time: start.Add(time.Hour + 30*time.Second)})
	assert.True(t, f.triggers(t, family)[24], "answered again")
	assert.Len(t, f.outbox(t, family), 1, "no second notice within the hour")

	status := f.r.status(t.Context())
	assert.NotContains(t, status, "Over the call rate", "the /status clock is now, long past 2026-11-23")
}

// A group's policy sets its own rate; 0 is no limit; main has none.
func TestSenderRateOfThePolicy(t *testing.T) {
	f := newFixture(t, `{"rate":"2/h"}`, func(c *Config) { c.SenderRate = 20 })
	now := time.Now().UTC()
	for i := range 3 {
		f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi", Time: now.Add(time.Duration(i-3) * time.Second)})
	}
	assert.Equal(t, []bool{true, true, false}, f.triggers(t, family))
	status := f.r.status(t.Context())
	assert.Contains(t, status, "Over the call rate now: user 7 in family (2 calls, answered again from ")

	g := newFixture(t, `{"allow":"*","rate":"0"}`, func(c *Config) { c.SenderRate = 1 })
	for range 5 {
		g.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy hi"})
	}
	assert.Equal(t, []bool{true, true, true, true, true}, g.triggers(t, family), "rate 0: no limit")
	assert.Empty(t, g.outbox(t, family))

	h := newFixture(t, "", func(c *Config) { c.SenderRate = 1 })
	for range 3 {
		h.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "hi"})
	}
	for _, m := range h.stored(t, owner) {
		assert.True(t, m.Triggered, "main has no rate")
	}
}

// /revoke goes through the service (owner only, audited); /status lists
// what the owner allowed.
func TestRevokeAndStatus(t *testing.T) {
	f := newFixture(t, "")
	ctx := t.Context()
	require.NoError(t, f.st.AllowEgress(ctx, storeAllowance("family", "example.org", 443)))
	require.NoError(t, f.st.AllowEgress(ctx, storeAllowance("family", "example.org", 8443)))
	require.NoError(t, f.st.AllowEgress(ctx, storeAllowance("family", "127.0.0.2", 8080)))
	status := f.r.status(ctx)
	assert.Contains(t, status, "Egress you allowed (/revoke to take back): family: ` 127.0.0.2:8080 `, ` example.org:443 `, ` example.org:8443 `.")

	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/revoke family example.org"})
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/revoke family 127.0.0.2:9"})
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/revoke family"})
	out := f.outbox(t, owner)
	require.Len(t, out, 3)
	assert.Contains(t, out[0], "Revoked: family is asked about")
	assert.Contains(t, out[0], "(2 allowances)")
	assert.Contains(t, out[1], "had no allowance")
	assert.Contains(t, out[2], "Usage: /revoke")
	left, err := f.st.ListEgressAllowed(ctx, "family")
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, "127.0.0.2", left[0].Host)
	assert.Len(t, f.audited(t, "revoke_egress", "allow"), 1)
	assert.True(t, strings.HasSuffix(f.audited(t, "revoke_egress", "allow")[0].Reason, "by the owner"))
}

func storeAllowance(group, host string, port int) store.EgressAllowance {
	return store.EgressAllowance{Group: group, Host: host, Port: port, AllowedBy: owner, Allowed: time.Now()}
}
