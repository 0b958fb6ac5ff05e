package e2e

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/test/harness"
)

// A profile's "runtime": "gvisor" runs its group under gVisor on a bwrap or
// Docker host: the group's agent sees gVisor's kernel, main's the host's.
// Where runsc does not work the group runs nothing and the owner hears why
// (internal/app's TestGVisorProfileRefusedWhereItDoesNotWork: the refusal).
func TestProfileRuntimeGVisor(t *testing.T) {
	if harness.Backend() == "gvisor" {
		t.Skip("the host's backend is gVisor already")
	}
	if _, err := exec.LookPath("runsc"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs runsc (apt-get install runsc) and root")
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	release := unix.ByteSliceToString(u.Release[:])

	h := harness.New(t, harness.Options{Owner: true, Profiles: `{"profiles":{"untrusted":{"runtime":"gvisor"}}}`})
	h.RegisterGroup(t, "family")
	h.OwnerSays("/profile family untrusted")
	h.WaitFor(harness.OwnerID, "family now runs with the profile untrusted")

	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, `@Andy TOOL bash {"command":"echo KERNEL=$(uname -r)"}`)
	got := h.Replies(harness.GroupChat, 1)[0]
	assert.Contains(t, got, "KERNEL=")
	assert.NotContains(t, got, "KERNEL="+release, "the group's agent runs on gVisor's kernel")

	h.OwnerSays(`TOOL bash {"command":"echo KERNEL=$(uname -r)"}`)
	h.WaitFor(harness.OwnerID, "KERNEL="+release)
}
