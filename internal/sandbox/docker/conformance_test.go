package docker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Params{
		Name:       "docker",
		New:        func(t *testing.T) sandboxtest.Backend { return testBackend(t, nil) },
		UID:        sandbox.UID,
		GID:        sandbox.GID,
		Env:        []string{"HOSTNAME=clawpen"}, // the engine always sets it
		StderrTail: sandbox.StderrTail,
		View: []sandboxtest.ViewCase{
			{Name: "only loopback in sysfs", Script: "ls /sys/class/net", Out: "lo\n"},
			{Name: "init is pid 1", Script: "cat /proc/1/comm", Out: "docker-init\n"},
		},
		Skip: map[string]string{
			"ExtraMountMasksAndWritePaths/MaskRefusesWrites": "a masked file is the host's /dev/null bound read-only " +
				"without nodev, and a device takes writes on a read-only mount: the write is accepted and lost " +
				"(the host file stays untouched)",
			"PinnedBindsNosuidNodev/Dev": "runc makes the device nodes on /dev's tmpfs, where nodev would " +
				"refuse them; no capability (CAP_MKNOD) and the devices cgroup keep other devices out",
			"SymlinkAboveSourceRefused": "without pins (a host run as uid 1000, not root) " +
				"the engine binds by path and follows a symlink swapped in above a source; a root host pins " +
				"every source (PinnedSymlinkAboveSourceRefused)",
			"SymlinkSwapAfterOpen": "without pins nothing is opened before the engine binds by path " +
				"(PinnedSymlinkSwapAfterOpen)",
			"ProcessLimit/Reported": "the engine does not report a refused fork; the host polls the container's " +
				"pids.events every 100 ms while it runs, and this run ends sooner (ProcessLimitReportedWhileRunning)",
		},
		Pinned: func(t *testing.T, l *sandboxtest.Layout) sandboxtest.Backend {
			return idmappedBackend(t, l)
		},
		AfterOpen: func(b sandboxtest.Backend, hook func()) { b.(*Backend).afterPin = hook },
		AfterRun: func(t *testing.T, spec sandbox.Spec) {
			require.Empty(t, leftovers(spec.InvocationID), "container of %s left behind", spec.InvocationID)
		},
	})
}
