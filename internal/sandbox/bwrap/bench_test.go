package bwrap

import (
	"context"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkStart compares the cost of starting /bin/true plainly, under raw bwrap
// with clawpen's exact flags, and through Backend.Run (prlimit, fds, cleanup).
func BenchmarkStart(b *testing.B) {
	f := newFixture(b, nil)
	spec := f.spec()
	// Each run leaves bwrap's init for the host's PID 1 to reap; do not let a
	// slow reaper trip the process limit mid-benchmark.
	spec.Limits.Pids = 4096

	b.Run("fork-exec", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, exec.Command("/bin/true").Run())
		}
	})

	b.Run("raw-bwrap", func(b *testing.B) {
		for b.Loop() {
			p, err := f.b.prepare(spec, []string{"/bin/true"})
			require.NoError(b, err)
			cmd := exec.Command(f.b.bwrap, p.args...)
			cmd.ExtraFiles = p.files
			if f.b.switchUser {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
					Uid: uint32(f.b.uid), Gid: uint32(f.b.gid), Groups: []uint32{}}}
			}
			err = cmd.Run()
			p.close()
			require.NoError(b, err)
		}
	})

	b.Run("backend-run", func(b *testing.B) {
		for b.Loop() {
			res, err := f.b.run(context.Background(), spec, []string{"/bin/true"})
			require.NoError(b, err)
			require.Equal(b, 0, res.ExitCode)
		}
	})
}
