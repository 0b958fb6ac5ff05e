package beneath

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sandboxUser is any ids a root host can take.
var sandboxUser = User{UID: 4713, GID: 4714}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a host that is not root acts with its own rights")
	}
}

// Do opens, creates and refuses as the sandbox user would, with no
// supplementary group of the host's, and gives the thread back unchanged.
func TestDoActsWithTheUsersRights(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"root-only", 0o600}, {"root-group", 0o640}, {"public", 0o644}} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.name), []byte(f.name), f.mode))
		require.NoError(t, os.Chmod(filepath.Join(dir, f.name), f.mode))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "shared"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(dir, "shared"), 0o777))
	dfd, err := Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(dfd)

	open := func(name string) error {
		fd, err := Openat(dfd, name, unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	require.NoError(t, os.Chmod(dir, 0o755)) // t.TempDir is 0700: the root is reached through dfd only
	err = sandboxUser.Do(func() error {
		assert.ErrorIs(t, open("root-only"), unix.EACCES)
		assert.ErrorIs(t, open("root-group"), unix.EACCES, "the host's group 0 is not the sandbox's")
		assert.NoError(t, open("public"))
		fd, err := Openat(dfd, "shared/made", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	require.NoError(t, err)
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(filepath.Join(dir, "shared/made"), &st))
	assert.Equal(t, []uint32{4713, 4714}, []uint32{st.Uid, st.Gid}, "what it creates is the user's")

	// Many at once, and the host's own opens between them: every thread
	// went back to the pool with the host's rights.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			assert.ErrorIs(t, sandboxUser.Do(func() error { return open("root-only") }), unix.EACCES)
			assert.NoError(t, open("root-only"))
		})
	}
	wg.Wait()
	fd, err := Openat(dfd, "shared/host-made", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	require.NoError(t, err)
	unix.Close(fd)
	require.NoError(t, unix.Lstat(filepath.Join(dir, "shared/host-made"), &st))
	assert.Equal(t, uint32(0), st.Uid)
}

// The sandbox has no supplementary group: a file the host may read only
// through one of its groups is refused while acting as the user, and the
// host's groups are back afterwards.
func TestBecomeDropsTheHostsGroups(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	p := filepath.Join(dir, "group-only")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o640))
	require.NoError(t, os.Chown(p, 0, 4715))
	require.NoError(t, os.Chmod(p, 0o640))

	runtime.LockOSThread() // this thread's groups are changed: it is not handed back until they are restored
	before, err := unix.Getgroups()
	require.NoError(t, err)
	require.NoError(t, unix.Setgroups([]int{4715}))
	host, err := unix.Getgroups()
	require.NoError(t, err)
	require.NoError(t, sandboxUser.become())
	_, readErr := os.ReadFile(p)
	during, groupsErr := unix.Getgroups()
	require.NoError(t, restore(host))
	after, err := unix.Getgroups()
	require.NoError(t, err)
	require.NoError(t, unix.Setgroups(before))
	runtime.UnlockOSThread()

	require.NoError(t, groupsErr)
	assert.Empty(t, during)
	assert.ErrorIs(t, readErr, unix.EACCES, "the host's group 4715 is not the sandbox's")
	assert.Equal(t, []int{4715}, after, "the host's groups are restored")
}

// The zero User is the host's own rights.
func TestDoZeroUserIsTheHost(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600))
	require.NoError(t, User{}.Do(func() error {
		_, err := os.ReadFile(filepath.Join(dir, "f"))
		return err
	}))
}

// Reopen checks the caller's rights on the file itself, as a sandbox's open
// of its bind's root does, whatever lies above it.
func TestReopen(t *testing.T) {
	needRoot(t)
	dir := t.TempDir() // 0700 root: not walkable by the user
	for name, mode := range map[string]os.FileMode{"open": 0o644, "closed": 0o600} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(name), mode))
	}
	reopen := func(name string) error {
		pfd, err := Open(filepath.Join(dir, name), unix.O_PATH, 0)
		require.NoError(t, err)
		defer unix.Close(pfd)
		return sandboxUser.Do(func() error {
			fd, err := Reopen(pfd, unix.O_RDONLY)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}
	assert.NoError(t, reopen("open"))
	assert.ErrorIs(t, reopen("closed"), unix.EACCES)
}

// Own makes a folder and hands it to the user once; a folder already the
// user's is left as it is.
func TestOwn(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	folder := filepath.Join(base, "groups", "a")
	require.NoError(t, os.MkdirAll(filepath.Join(folder, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(folder, "sub", "f"), []byte("x"), 0o644))
	rep, err := sandboxUser.Own(context.Background(), folder, 0o755)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Changed)
	for _, p := range []string{folder, filepath.Join(folder, "sub"), filepath.Join(folder, "sub", "f")} {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(p, &st))
		assert.Equal(t, uint32(4713), st.Uid, p)
	}
	rep, err = sandboxUser.Own(context.Background(), folder, 0o755)
	require.NoError(t, err)
	assert.Equal(t, WalkReport{}, rep, "already the user's")

	fresh := filepath.Join(base, "groups", "b")
	_, err = User{}.Own(context.Background(), fresh, 0o700)
	require.NoError(t, err)
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(fresh, &st))
	assert.Equal(t, uint32(os.Geteuid()), st.Uid, "the host's own rights: made, not handed over")
}
