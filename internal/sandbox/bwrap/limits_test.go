package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The command sees its limits from its first instruction: the host sets them
// on the namespace init before it forks the command.
func TestLimitsInPlaceWhenCommandStarts(t *testing.T) {
	f := newFixture(t, nil)
	spec := f.spec()
	spec.Limits.Pids = 77
	spec.Limits.MemoryBytes = 600 << 20
	o := f.cmd(t, spec, "/bin/cat", "/proc/self/limits")
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, o.res.Stderr)
	want := map[string]string{ // soft and hard
		"Max processes":      "77 77",
		"Max address space":  "629145600 629145600",
		"Max open files":     "1024 1024",
		"Max core file size": "0 0",
		"Max file size":      "1073741824 1073741824",
	}
	for _, line := range strings.Split(o.stdout, "\n") {
		for name, limits := range want {
			if strings.HasPrefix(line, name+" ") {
				f := strings.Fields(strings.TrimPrefix(line, name))
				require.GreaterOrEqual(t, len(f), 2, line)
				assert.Equal(t, limits, f[0]+" "+f[1], name)
				delete(want, name)
			}
		}
	}
	assert.Empty(t, want, "limits missing from /proc/self/limits:\n%s", o.stdout)
}

// When the limits cannot be set, the sandbox is killed before the command
// runs: nothing executes without its limits.
func TestReleaseFailureRunsNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.b.beforeRelease = func() error { return errors.New("planted release failure") }
	o := f.sh(t, f.spec(), "echo ran > /workspace/group/ran")
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "planted release failure")
	_, err := os.Stat(filepath.Join(f.group, "ran"))
	assert.True(t, os.IsNotExist(err), "the command ran although its limits were never set")

	// The backend is fine afterwards.
	f.b.beforeRelease = nil
	o = f.sh(t, f.spec(), "echo alive")
	require.NoError(t, o.err)
	assert.Equal(t, "alive\n", o.stdout)
}
