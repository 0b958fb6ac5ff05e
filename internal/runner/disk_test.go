package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path string, n int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, make([]byte, n), 0o644))
}

func TestMeasureDiskCountsAllocatedBytesAndEntries(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a"), 1<<20)
	write(t, filepath.Join(root, "d/e/f"), 1<<20)
	// A sparse file uses almost nothing however large it claims to be.
	sparse, err := os.Create(filepath.Join(root, "sparse"))
	require.NoError(t, err)
	require.NoError(t, sparse.Truncate(1<<40))
	require.NoError(t, sparse.Close())

	u, err := measureDisk(root)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, u.Bytes, int64(2<<20))
	assert.Less(t, u.Bytes, int64(3<<20), "a sparse file counts its blocks, not its size")
	assert.Equal(t, int64(5), u.Entries, "a, d, d/e, d/e/f, sparse")
}

func TestMeasureDiskDoesNotFollowSymlinks(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "big"), 4<<20)
	root := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "big"), filepath.Join(root, "filelink")))

	u, err := measureDisk(root)
	require.NoError(t, err)
	assert.Less(t, u.Bytes, int64(1<<20), "the target of a symlink is not counted")
	assert.Equal(t, int64(2), u.Entries)

	// A root that is itself a symlink is not walked either.
	linkRoot := filepath.Join(t.TempDir(), "r")
	require.NoError(t, os.Symlink(outside, linkRoot))
	_, err = measureDisk(linkRoot)
	require.Error(t, err)
}

func TestMeasureDiskMissingRootIsEmpty(t *testing.T) {
	u, err := measureDisk(filepath.Join(t.TempDir(), "absent"))
	require.NoError(t, err)
	assert.Equal(t, diskUsage{}, u)
}

// A directory the sandbox removes while the host lists it (as when it swaps
// its inbox for a symlink) holds nothing any more: it is not a reason to
// stop the run at its quota.
func TestWalkDirOfARemovedDirectoryIsEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inbox")
	require.NoError(t, os.Mkdir(dir, 0o755))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	require.NoError(t, os.Remove(dir))
	var u diskUsage
	require.NoError(t, walkDir(fd, dir, 1, &u))
	assert.Zero(t, u.Entries)
}

func TestMeasureDiskRefusesTooDeepTrees(t *testing.T) {
	root := t.TempDir()
	p := root
	for range maxTreeDepth + 2 {
		p = filepath.Join(p, "d")
	}
	require.NoError(t, os.MkdirAll(p, 0o755))
	_, err := measureDisk(root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deeper than")
}

func TestCheckDisk(t *testing.T) {
	group, session := t.TempDir(), t.TempDir()
	write(t, filepath.Join(group, "g"), 600<<10)
	write(t, filepath.Join(session, "s"), 600<<10)

	_, err := checkDisk(2<<20, group, session)
	require.NoError(t, err)

	_, err = checkDisk(1<<20, group, session)
	require.ErrorIs(t, err, ErrDiskQuota, "both trees count towards one quota")
	assert.Contains(t, err.Error(), "quota of 1 MB")

	// Entries are priced too: many empty files exceed a small quota.
	many := t.TempDir()
	for i := range 300 {
		write(t, filepath.Join(many, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))), 0)
	}
	_, err = checkDisk(1<<20, many)
	require.ErrorIs(t, err, ErrDiskQuota)
}

func TestWatchDiskStopsAtQuota(t *testing.T) {
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	done := make(chan diskUsage, 1)
	go func() { done <- watchDisk(ctx, 1<<20, func(err error) { stopped <- err }, root) }()

	write(t, filepath.Join(root, "fill"), 2<<20)
	err := <-stopped
	require.ErrorIs(t, err, ErrDiskQuota)
	peak := <-done
	assert.GreaterOrEqual(t, peak.Bytes, int64(2<<20))
}

func TestWatchDiskEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan diskUsage, 1)
	go func() {
		done <- watchDisk(ctx, 1<<20, func(error) { t.Error("no quota was exceeded") }, t.TempDir())
	}()
	cancel()
	<-done
	assert.False(t, errors.Is(ctx.Err(), ErrDiskQuota))
}

// TestMeasureDiskRefusesASymlinkAboveTheRoot: a root whose parent was
// swapped for a symlink, to another group's folder or to /etc, is not
// walked: the run is refused rather than measured elsewhere.
func TestMeasureDiskRefusesASymlinkAboveTheRoot(t *testing.T) {
	base := t.TempDir()
	write(t, filepath.Join(base, "groups", "other", "sub", "big"), 4<<20)
	require.NoError(t, os.Symlink(filepath.Join(base, "groups", "other"), filepath.Join(base, "tob")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(base, "toetc")))
	for _, root := range []string{filepath.Join(base, "tob", "sub"), filepath.Join(base, "toetc", "ssl")} {
		u, err := measureDisk(root)
		require.Error(t, err, root)
		assert.Zero(t, u.Entries, root)
		_, err = checkDisk(1<<30, root)
		require.ErrorIs(t, err, ErrDiskQuota, root)
	}
}
