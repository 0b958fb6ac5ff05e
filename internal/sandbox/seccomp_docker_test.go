package sandbox

import (
	"slices"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestDockerSeccompProfile expands the profile as the engine does for a container
// with every capability dropped and checks what it allows.
func TestDockerSeccompProfile(t *testing.T) {
	body, err := DockerSeccompProfile()
	require.NoError(t, err)
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	got, err := mobyseccomp.LoadProfile(body, spec)
	require.NoError(t, err)

	assert.Equal(t, specs.ActErrno, got.DefaultAction)
	assert.Len(t, got.Architectures, 1, "only the native ABI: %v", got.Architectures)

	allowed := map[string][]specs.LinuxSyscall{}
	for _, s := range got.Syscalls {
		if s.Action != specs.ActAllow {
			continue
		}
		for _, n := range s.Names {
			allowed[n] = append(allowed[n], s)
		}
	}
	for _, r := range seccompDeny {
		if len(r.Args) > 0 {
			continue
		}
		for _, n := range r.Names {
			assert.NotContains(t, allowed, n, "%s is allowed (%s)", n, r.Why)
		}
	}
	for _, n := range []string{"read", "write", "execve", "openat", "wait4", "ioctl", "personality", "clone"} {
		assert.Contains(t, allowed, n, "Docker's own allowlist lost %s", n)
	}
	var families []uint64
	for _, s := range allowed["socket"] {
		require.Len(t, s.Args, 1)
		require.Equal(t, specs.OpEqualTo, s.Args[0].Op)
		families = append(families, s.Args[0].Value)
	}
	slices.Sort(families)
	assert.Equal(t, []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}, families)
	for _, s := range allowed["clone"] {
		require.NotEmpty(t, s.Args, "clone allowed whatever its flags")
		assert.Equal(t, specs.OpMaskedEqual, s.Args[0].Op)
		assert.NotZero(t, s.Args[0].Value&unix.CLONE_NEWUSER)
	}
}
