package router

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
)

func TestAuditCommand(t *testing.T) {
	f := newFixture(t, "")
	ctx := t.Context()
	t0 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	for i, reason := range []string{"FIRST", "SECOND", "THIRD"} {
		require.NoError(t, f.st.Audit(ctx, domain.AuditEntry{Group: "family", Operation: "ipc.send_message", Decision: "deny",
			Reason: reason + ` group "family" may only send messages to its own chat`, Time: t0.Add(time.Duration(i) * time.Minute)}))
	}
	private := func(from int64, text string) {
		f.say(t, domain.Inbound{ChatID: from, ChatType: "private", SenderID: from, Text: text})
	}
	for _, tc := range []struct {
		text          string
		want, notWant []string
	}{
		{"/audit 2", []string{"THIRD", "SECOND", "family ipc.send_message deny", "may only send messages to its own chat"}, []string{"FIRST"}},
		{"/audit", []string{"THIRD", "SECOND", "FIRST"}, nil},
		{"/audit 0", []string{"Usage: /audit [n]"}, []string{"FIRST"}},
		{"/audit many", []string{"Usage: /audit [n]"}, []string{"FIRST"}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			n := len(f.outbox(t, owner))
			private(owner, tc.text)
			out := f.outbox(t, owner)
			require.Len(t, out, n+1)
			for _, w := range tc.want {
				assert.Contains(t, out[n], w)
			}
			for _, w := range tc.notWant {
				assert.NotContains(t, out[n], w)
			}
		})
	}

	// Nobody else reads it: a stranger's private /audit and a member's in a group get nothing.
	private(stranger, "/audit")
	assert.Empty(t, f.outbox(t, stranger))
	f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "/audit"})
	assert.Empty(t, f.outbox(t, family))
}

func TestStatusShowsDatabaseSize(t *testing.T) {
	f := newFixture(t, "")
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/status"})
	out := f.outbox(t, owner)
	require.Len(t, out, 1)
	assert.Regexp(t, `Database: \d+ (bytes|MiB|GiB)\.`, out[0])
}

// What a sandbox chose (an egress destination, a refused request's
// details) reaches /audit inert: no link, no markup, no command.
func TestAuditShowsSandboxTextInert(t *testing.T) {
	f := newFixture(t, "")
	ctx := t.Context()
	require.NoError(t, f.st.Audit(ctx, domain.AuditEntry{Group: "family", Operation: "egress", Decision: "deny",
		Target: "[pay here](https://evil.example)", Reason: `CONNECT <a href="https://evil.example">click</a> /register`}))
	require.NoError(t, f.st.Audit(ctx, domain.AuditEntry{Group: "family", Operation: "ipc.<b>x</b>", Decision: "deny", Reason: "unknown"}))
	f.say(t, domain.Inbound{ChatID: owner, ChatType: "private", SenderID: owner, Text: "/audit"})
	out := f.outbox(t, owner)
	require.NotEmpty(t, out)
	last := markup.ToHTML(out[len(out)-1]) // as it is sent
	assert.NotContains(t, last, "<a ")
	assert.NotContains(t, last, "<b>")
	assert.Contains(t, last, "<code>[pay here](https://evil.example)</code>")
	assert.Contains(t, last, `<code>CONNECT &lt;a href="https://evil.example"&gt;click&lt;/a&gt; /register</code>`)
}
