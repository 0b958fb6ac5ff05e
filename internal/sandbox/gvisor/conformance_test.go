package gvisor

import (
	"testing"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	u := sandboxUser(t)
	sandboxtest.Run(t, sandboxtest.Params{
		Name: "gvisor",
		New:  func(t *testing.T) sandboxtest.Backend { return testBackend(t, u, t.TempDir()) },
		// Writes land as the sandbox user through idmapped pins; runsc
		// sets no PWD (no Env).
		UID:        u.uid,
		GID:        u.gid,
		StderrTail: sandbox.StderrTail,
		// gVisor's VFS checks the file's permissions before the mount's
		// read-only flag; /usr is root's and global nobody's to the agent.
		ReadOnlyError: "Permission denied",
		View: []sandboxtest.ViewCase{
			// In place of /proc/self/status's lines, which gVisor lacks.
			{Name: "no new privileges", Script: "setpriv -d 2>/dev/null | grep -E '^(no_new_privs|Ambient capabilities):'",
				Out: "no_new_privs: 1\nAmbient capabilities: [unsupported]\n"},
		},
		Skip: map[string]string{
			"View/no ambient capabilities, no new privileges": "gVisor's /proc/self/status has no CapAmb or NoNewPrivs line " +
				"(runsc 2022-12-19); setpriv reads them from the kernel (View/no new privileges)",
			"View/tmp nosuid nodev": "gVisor's /proc/mounts shows no nosuid or nodev flag of any mount; /tmp is the Sentry's " +
				"own tmpfs, which holds no host device, and no_new_privs ignores setuid bits",
			"View/host socket dir": "gVisor's root is empty and read-only: /run/clawpen exists only around a bound socket " +
				"(HostSocketIsBound)",
			"PinnedBindsNosuidNodev/Flags": "gVisor's mountinfo shows only ro or rw; the pins its gofer opens the binds " +
				"through are nosuid,nodev on the host",
			"PinnedBindsNosuidNodev/Dev": "gVisor's mountinfo shows only ro or rw; /dev is the Sentry's own, with no host device",
			"ProcessLimit": "gVisor enforces no process limit of its own: the host's pids cgroup also counts runsc's threads " +
				"and stubs (hostPids), and past it the whole sandbox ends instead of a fork failing (TestPidsLimit)",
			"ProcessLimitReportedWhileRunning": "no fork is refused while the sandbox runs on: past the host's pids limit " +
				"the whole sandbox ends (TestPidsLimit)",
			"MemoryLimitKillsAProcess": "the host's OOM killer ends the whole sandbox, Sentry included, never one process " +
				"of it (runsc 2022-12-19 on cgroup v1; MemoryLimitKillsTheCommand)",
		},
		// Every gVisor run pins; this one's pins are the layout's, which
		// the suite finds released after each run.
		Pinned: func(t *testing.T, l *sandboxtest.Layout) sandboxtest.Backend {
			b := testBackend(t, u, t.TempDir())
			b.cfg.PinDir = l.Pins
			return b
		},
		// The agent's processes are the Sentry's, not the host's: what the
		// host holds of the run (runsc, gofer, Sentry, stubs, cgroups) is gone.
		AfterRun: func(t *testing.T, spec sandbox.Spec) { assertGone(t, spec.InvocationID) },
	})
}
