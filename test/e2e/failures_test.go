package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// With no working sandbox the host runs nothing: the owner is told why, a
// group is told the host has no sandbox, and the model is never called.
func TestNoSandboxRefusesAndSaysWhy(t *testing.T) {
	if harness.Backend() != "bwrap" {
		t.Skip("made by hiding bwrap; the Docker run covers a missing image in its backend tests")
	}
	// A PATH without bwrap.
	bin := t.TempDir()
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"PATH": bin}})
	h.OwnerSays("hello?")
	got := h.Replies(harness.OwnerID, 1)[0]
	assert.Contains(t, got, "no sandbox")
	assert.Contains(t, got, "bubblewrap")

	h.RegisterGroup(t, "family")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy hi")
	group := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, group, "no working sandbox")
	assert.NotContains(t, group, "bubblewrap", "host details stay with the owner")
	assert.Empty(t, h.LLM.Requests(), "nothing ran: the model was never called")
	assert.Contains(t, h.Stderr.String(), "agents will not run")
}

// A root host without its dedicated sandbox user runs nothing, on either
// backend: the owner is told why and how to make the user, /status and the
// log say it, and the model is never called.
func TestRootWithoutSandboxUserRunsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a host that is not root runs sandboxes as itself")
	}
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_SANDBOX_USER": "clawpen-e2e-missing"}})
	h.OwnerSays("hello?")
	got := h.Replies(harness.OwnerID, 1)[0]
	assert.Contains(t, got, "no sandbox")
	assert.Contains(t, got, "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin clawpen-e2e-missing")
	h.OwnerSays("/status")
	status := h.Replies(harness.OwnerID, 2)[1]
	assert.Contains(t, status, "clawpen-e2e-missing")
	assert.Empty(t, h.LLM.Requests(), "nothing ran: the model was never called")
	assert.Contains(t, h.Stderr.String(), "agents will not run")
}

// A run that keeps failing is answered with a failure notice once; its
// messages are not sent to the model again with the next call.
func TestFailedRunIsNotRepeated(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.RegisterGroup(t, "family")
	// Every model call of three attempts fails (the SDK tries each call 3 times).
	h.LLM.FailNext(9, 500)
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy POISON-MESSAGE")
	notice := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, notice, "could not answer")
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy second try")
	got := h.Replies(harness.GroupChat, 2)[1]
	assert.Contains(t, got, "second try")
	assert.NotContains(t, got, "POISON-MESSAGE")
	owner := strings.Join(harness.Texts(h.TG.SentTo(harness.OwnerID)), "\n")
	assert.Contains(t, owner, "failed after retries", "the owner learns the details")
}

// An allowlisted folder appears at /workspace/extra/<name>, read-only for a
// group (nonMainReadOnly), with secrets inside it masked.
func TestExtraMountVisibleMaskedAndReadOnly(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, AllowedRoots: []harness.AllowedRoot{{Path: "projects", ReadWrite: true}}})
	h.RegisterGroup(t, "family")
	proj := filepath.Join(h.Outside, "projects", "app")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "README.md"), []byte("VISIBLE-README"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".env"), []byte("MASKED-DOTENV"), 0o644))
	out := h.CLI("groups", "mount", "add", "family", proj, "app")
	assert.Contains(t, out, "read-only")
	assert.Contains(t, h.CLI("mounts", "check", "family"), "allow ro")

	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID,
		`@Andy TOOL bash {"command":"cat /workspace/extra/app/README.md; echo; echo env=[$(cat /workspace/extra/app/.env)]; touch /workspace/extra/app/x 2>/dev/null && echo RO-BROKEN || echo RO-HELD"}`)
	got := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, got, "VISIBLE-README")
	assert.Contains(t, got, "env=[]")
	assert.Contains(t, got, "RO-HELD")
	assert.NotContains(t, got, "MASKED-DOTENV")
}
