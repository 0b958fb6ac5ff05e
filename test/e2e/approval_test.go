package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// approvalTimeout is the hosts' CLAWPEN_APPROVAL_TIMEOUT here: long enough
// for a test to press in time on a loaded machine, short enough to wait
// for once.
const approvalTimeout = "15s"

// approvalHost is a host whose group family runs with a profile listing
// the bridge tool ask_w, marked "approval: groups", which appends its
// argument to a file on the host (what ran returns its lines).
func approvalHost(t *testing.T, profiles string, extra map[string]string) (h *harness.Host, ran func() []string) {
	t.Helper()
	env := map[string]string{"CLAWPEN_APPROVAL_TIMEOUT": approvalTimeout}
	for k, v := range extra {
		env[k] = v
	}
	h = harness.New(t, harness.Options{Owner: true, Profiles: profiles, Extra: env})
	evidence := filepath.Join(h.Dir, "ask-evidence")
	dir := filepath.Join(h.Home, ".config/clawpen/tools")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	writeToolFile(t, dir, "ask_w", "description: appends its text on the host\ngroups: all\napproval: groups\n"+
		fmt.Sprintf(`command: ["/bin/sh", "-c", "echo \"$0\" >> %s; echo RAN-$0", "{text}"]`, evidence)+
		"\ninput_schema: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}")
	h.OwnerSays("hello")
	h.WaitFor(harness.OwnerID, "hello")
	h.RegisterGroup(t, "family")
	return h, func() []string {
		b, err := os.ReadFile(evidence)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		return strings.Fields(string(b))
	}
}

// memberSays is a member's message in the family group.
func memberSays(h *harness.Host, text string) {
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+text)
}

// groupAnswer waits for the group's n-th message and returns it.
func groupAnswer(h *harness.Host, n int) string {
	return h.Replies(harness.GroupChat, n)[n-1]
}

// End to end, through real sandboxes: a group's call of an "approval:
// groups" tool waits for the owner; "Allow once" runs it once and the next
// call asks again; "Deny" and no answer give the sandbox "denied: …" and
// run nothing; a host that stops while a call waits refuses it (the
// question says so), and one that crashes expires it at its next start;
// the run is asked again, and nothing ever runs without the owner's press.
func TestApprovalOfBridgeTools(t *testing.T) {
	h, ran := approvalHost(t, `{"profiles":{"toolful":{"tools":["ask_w"]}}}`, nil)
	h.CLI("groups", "profile", "family", "toolful")

	memberSays(h, toolCall("ask_w", map[string]any{"text": "one"}))
	q := h.Approval(1)
	assert.Contains(t, q.Visible, "Group family asks to run the bridge tool ask_w, exactly this command:")
	assert.Contains(t, q.Visible, `"/bin/sh", "-c", `)
	assert.Contains(t, q.Visible, `"one"]`)
	assert.Equal(t, []string{"Allow once", "Deny"}, []string{q.Keyboard[0][0].Text, q.Keyboard[0][1].Text})
	assert.Empty(t, ran(), "nothing ran before the owner's press")
	assert.Equal(t, "Allowed once.", h.Press(harness.OwnerID, q, "Allow once"))
	assert.Contains(t, groupAnswer(h, 1), "RAN-one")
	assert.Equal(t, []string{"one"}, ran())
	h.WaitEdited(q, "Allowed once, by you, at ")

	memberSays(h, toolCall("ask_w", map[string]any{"text": "two"}))
	q = h.Approval(2)
	assert.Equal(t, "Denied.", h.Press(harness.OwnerID, q, "Deny"))
	assert.Contains(t, groupAnswer(h, 2), "denied: the owner declined")
	h.WaitEdited(q, "Denied, by you, at ")

	memberSays(h, toolCall("ask_w", map[string]any{"text": "three"}))
	q = h.Approval(3)
	assert.Contains(t, groupAnswer(h, 3), "denied: no answer from the owner")
	h.WaitEdited(q, "Denied: no answer within "+approvalTimeout)
	assert.Equal(t, []string{"one"}, ran())

	// The host stops while a call waits: the call is refused, its
	// question says so, and a press on it later is refused.
	memberSays(h, toolCall("ask_w", map[string]any{"text": "four"}))
	q = h.Approval(4)
	once := harness.Button(q, "Allow once")
	h.Stop()
	h.WaitEdited(q, "Denied: the host stopped before an answer")
	assert.Contains(t, h.AuditLog(), "family ipc.host_tool deny the host stopped before the owner answered")
	h.Start()
	assert.Contains(t, h.PressData(harness.OwnerID, q.ChatID, q.MessageID, once), "already decided: expired: the host stopped")
	// The sandbox either took its denial and answered before it was cut,
	// or its messages are run again after the restart and ask anew.
	require.Eventually(t, func() bool {
		return len(h.Approvals()) >= 5 || contains(harness.Texts(h.TG.SentTo(harness.GroupChat)), "the host stopped before the owner answered")
	}, harness.Wait, 20*time.Millisecond)
	answers := 3
	if len(h.Approvals()) < 5 {
		t.Log("the run answered with its denial before the host stopped")
		answers++
		memberSays(h, toolCall("ask_w", map[string]any{"text": "four"}))
	}
	q = h.Approval(5)
	once = harness.Button(q, "Allow once")

	// It crashes while that one waits: the next start expires it, and its
	// question says so (edited at the start, or at the owner's press when
	// the crash came before the host recorded which message asked it).
	h.Crash()
	h.Start()
	assert.Contains(t, h.PressData(harness.OwnerID, q.ChatID, q.MessageID, once), "already decided: expired: the host restarted")
	h.WaitEdited(q, "Expired: the host restarted before an answer")
	q = h.Approval(6) // the run, cut by the crash, is run again and asks anew
	assert.Contains(t, q.Visible, `"four"]`)
	h.Press(harness.OwnerID, q, "Deny")
	assert.Contains(t, groupAnswer(h, answers+1), "denied: the owner declined")
	assert.Equal(t, []string{"one"}, ran(), "only the call the owner allowed ran")
	assert.Contains(t, h.AuditLog(), "family approval deny tool ask_w args sha256:")
}

func contains(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// End to end, through real sandboxes: under egress_ask a destination the
// list does not hold is put to the owner (the list names its address
// literally, so a loopback test server may stand for a public one); "Allow
// for family" lets later runs reach it without asking, /status and
// `clawpen profiles list` show it, /revoke (and its CLI twin) take it
// back; a denial is the tool's 403; an unlisted forbidden address is
// refused outright, never asked.
func TestApprovalOfEgress(t *testing.T) {
	ln, err := net.Listen("tcp", egressIP+":0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ASKED-OK")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	dest := ln.Addr().String()
	forbidden, err := net.Listen("tcp", "127.0.0.3:0")
	require.NoError(t, err)
	t.Cleanup(func() { forbidden.Close() })

	h, _ := approvalHost(t, `{"profiles":{"asker":{"network":"allowlist","egress":["`+egressIP+`:1"],"egress_ask":true}}}`, nil)
	h.CLI("groups", "profile", "family", "asker")
	curl := func() {
		memberSays(h, "\n"+bashTool(fmt.Sprintf(`echo FORBIDDEN=$(curl -sS --max-time 20 http://%s/x 2>&1 | head -c 200); echo ASK=$(curl -sS --max-time 100 http://%s/ask 2>&1 | head -c 300)`,
			forbidden.Addr(), dest), 120))
	}

	curl()
	q := h.Approval(1)
	assert.Contains(t, q.Visible, "Group family asks to connect to "+dest+", which its egress list does not hold.")
	assert.Equal(t, []string{"Allow once", "Allow for family", "Deny"}, []string{q.Keyboard[0][0].Text, q.Keyboard[0][1].Text, q.Keyboard[0][2].Text})
	assert.Equal(t, "Allowed for family.", h.Press(harness.OwnerID, q, "Allow for family"))
	got := groupAnswer(h, 1)
	assert.Contains(t, got, "ASK=ASKED-OK")
	assert.Contains(t, got, "FORBIDDEN={\"error\":\"denied: "+forbidden.Addr().String()+" is a loopback address")
	h.WaitEdited(q, "Allowed for family from now on, by you")

	// A later run reaches it without asking.
	curl()
	assert.Contains(t, groupAnswer(h, 2), "ASK=ASKED-OK")
	assert.Len(t, h.Approvals(), 1, "not asked again")
	n := len(h.TG.SentTo(harness.OwnerID))
	h.OwnerSays("/status")
	assert.Contains(t, h.Replies(harness.OwnerID, n+1)[n], "Egress you allowed (/revoke to take back): family: "+dest+".")
	assert.Contains(t, h.CLI("profiles", "list"), dest)

	h.OwnerSays("/revoke family " + egressIP)
	assert.Contains(t, h.Replies(harness.OwnerID, n+2)[n+1], "Revoked: family is asked about "+egressIP+" again")
	curl()
	q = h.Approval(2)
	h.Press(harness.OwnerID, q, "Deny")
	assert.Contains(t, groupAnswer(h, 3), "ASK={\"error\":\"denied: "+dest+" is not in this group's egress list, and the owner declined\"}")

	// The CLI twin.
	curl()
	h.Press(harness.OwnerID, h.Approval(3), "Allow for family")
	assert.Contains(t, groupAnswer(h, 4), "ASK=ASKED-OK")
	assert.Contains(t, h.CLI("profiles", "revoke", "family", dest), "revoked: family is asked about "+dest)
	assert.NotContains(t, h.CLI("profiles", "list"), dest)
	curl()
	h.Press(harness.OwnerID, h.Approval(4), "Allow once")
	assert.Contains(t, groupAnswer(h, 5), "ASK=ASKED-OK")
	assert.Len(t, h.Approvals(), 4, "one question per run that was not allowed for the group")
	log := h.AuditLog()
	assert.Contains(t, log, fmt.Sprintf(`family egress allow HTTP %s: allowed by "the owner, for group family"`, dest))
	assert.Contains(t, log, fmt.Sprintf(`family egress allow HTTP %s: allowed by "the owner, once"`, dest))
	assert.Contains(t, log, fmt.Sprintf(`family egress deny HTTP %s: %s is not in this group's egress list, and the owner declined`, dest, dest))
}
