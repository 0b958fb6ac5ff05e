package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process started in a scope is born there, and so is all it starts,
// also a grandchild in a session of its own; Close kills them all and
// removes the scope.
func TestScopeHoldsAndKillsDetachedDescendants(t *testing.T) {
	s, err := NewScope("clawpen-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cmd := exec.Command("/bin/sh", "-c", "setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: s.FD()}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	var grandchild int
	_, err = fmt.Sscan(line, &grandchild)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })

	pids, err := Procs(s.Dir())
	require.NoError(t, err)
	assert.Contains(t, pids, cmd.Process.Pid, "the leader is in the scope")
	assert.Contains(t, pids, grandchild, "the detached grandchild is in the scope")

	require.NoError(t, s.Close())
	_ = cmd.Wait()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", grandchild))
	assert.True(t, err != nil || strings.Contains(string(st), ") Z "), "grandchild %d still runs: %s", grandchild, st)
	_, err = os.Stat(s.Dir())
	assert.ErrorIs(t, err, os.ErrNotExist, "the scope is removed")
	assert.NoError(t, s.Close(), "a second Close does nothing")
}

// Where no cgroup v2 hierarchy is mounted, no scope is made, and the
// error says what would make one possible.
func TestScopeNeedsCgroupV2(t *testing.T) {
	_, err := newScope([]string{t.TempDir()}, "/proc/self/cgroup", "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no cgroup v2 hierarchy at")
	assert.Contains(t, err.Error(), "fix:")

	proc := filepath.Join(t.TempDir(), "cgroup")
	require.NoError(t, os.WriteFile(proc, []byte("4:memory:/x\n"), 0o600))
	_, err = newScope(unifiedMounts, proc, "x")
	require.Error(t, err, "a process in no v2 cgroup")
	assert.Contains(t, err.Error(), "no cgroup v2 line")
}
