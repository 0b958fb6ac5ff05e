package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tree is groups/a (the group acted on), groups/b (another group's folder)
// and, inside a, directories swapped for symlinks: to b and to /etc.
func tree(t *testing.T) (base string) {
	t.Helper()
	base = t.TempDir()
	for _, d := range []string{"groups/a/sub", "groups/b/sub"} {
		require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	for _, f := range []string{"groups/a/sub/passwd", "groups/b/sub/passwd", "groups/b/secret"} {
		require.NoError(t, os.WriteFile(filepath.Join(base, f), []byte(f), 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(base, "groups/b"), filepath.Join(base, "groups/a/tob")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(base, "groups/a/toetc")))
	require.NoError(t, os.Symlink("../b", filepath.Join(base, "groups/a/relb")))
	require.NoError(t, os.Symlink("secret", filepath.Join(base, "groups/b/link")))
	return base
}

func TestOpen(t *testing.T) {
	base := tree(t)
	for _, tc := range []struct {
		name  string
		path  string
		flags int
		want  error // nil: opens
		link  bool  // opened the symlink itself
	}{
		{"file", "groups/a/sub/passwd", unix.O_RDONLY, nil, false},
		{"directory", "groups/a/sub", unix.O_RDONLY | unix.O_DIRECTORY, nil, false},
		{"parent swapped for a symlink to another group", "groups/a/tob/sub/passwd", unix.O_RDONLY, unix.ELOOP, false},
		{"parent swapped for a relative symlink to another group", "groups/a/relb/secret", unix.O_RDONLY, unix.ELOOP, false},
		{"parent swapped for a symlink to /etc", "groups/a/toetc/passwd", unix.O_RDONLY, unix.ELOOP, false},
		{"last component a symlink", "groups/b/link", unix.O_RDONLY, unix.ELOOP, false},
		{"last component a symlink, O_PATH|O_NOFOLLOW", "groups/b/link", unix.O_PATH | unix.O_NOFOLLOW, nil, true},
		{"symlink as directory with O_PATH|O_NOFOLLOW", "groups/a/toetc/passwd", unix.O_PATH | unix.O_NOFOLLOW, unix.ELOOP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := Open(filepath.Join(base, tc.path), tc.flags, 0)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				assert.Equal(t, -1, fd)
				return
			}
			require.NoError(t, err)
			defer unix.Close(fd)
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(fd, &st))
			assert.Equal(t, tc.link, st.Mode&unix.S_IFMT == unix.S_IFLNK)
		})
	}
}

func TestOpenRefusesRelativePaths(t *testing.T) {
	_, err := Open("groups/a", unix.O_PATH, 0)
	require.ErrorIs(t, err, ErrNotAbsolute)
}

func TestOpenat(t *testing.T) {
	base := tree(t)
	dir, err := Open(filepath.Join(base, "groups/a"), unix.O_PATH|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	for _, tc := range []struct {
		name string
		want error
	}{
		{"sub/passwd", nil},
		{"tob/secret", unix.ELOOP},
		{"toetc/passwd", unix.ELOOP},
		{"../b/secret", unix.EXDEV},
		{filepath.Join(base, "groups/b/secret"), unix.EXDEV},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := Openat(dir, tc.name, unix.O_RDONLY, 0)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			_ = unix.Close(fd)
		})
	}
}

func TestLstat(t *testing.T) {
	base := tree(t)
	var st unix.Stat_t
	require.NoError(t, Lstat(filepath.Join(base, "groups/b/link"), &st))
	assert.Equal(t, uint32(unix.S_IFLNK), st.Mode&unix.S_IFMT, "a trailing symlink is stat'ed itself")
	require.ErrorIs(t, Lstat(filepath.Join(base, "groups/a/toetc/passwd"), &st), unix.ELOOP)
}

func TestMkdirAll(t *testing.T) {
	base := tree(t)
	require.NoError(t, MkdirAll(filepath.Join(base, "groups/a/new/deeper"), 0o755))
	require.DirExists(t, filepath.Join(base, "groups/a/new/deeper"))
	require.NoError(t, MkdirAll(filepath.Join(base, "groups/a/new/deeper"), 0o755), "an existing directory is fine")

	for _, p := range []string{"groups/a/tob/made", "groups/a/relb/made", "groups/a/tob"} {
		err := MkdirAll(filepath.Join(base, p), 0o755)
		require.ErrorIs(t, err, unix.ELOOP, p)
	}
	assert.NoDirExists(t, filepath.Join(base, "groups/b/made"), "nothing made in another group's folder")

	require.NoError(t, os.WriteFile(filepath.Join(base, "groups/a/file"), nil, 0o644))
	require.ErrorIs(t, MkdirAll(filepath.Join(base, "groups/a/file/x"), 0o755), unix.ENOTDIR)
}

func TestMkdirAllThroughSymlinkToEtc(t *testing.T) {
	base := tree(t)
	// /etc/ssl exists on every host these tests run on; nothing is made there.
	err := MkdirAll(filepath.Join(base, "groups/a/toetc/ssl/clawpen-test"), 0o755)
	require.ErrorIs(t, err, unix.ELOOP)
	_, serr := os.Lstat("/etc/ssl/clawpen-test")
	assert.True(t, errors.Is(serr, os.ErrNotExist))
}

func TestRemove(t *testing.T) {
	base := tree(t)
	b := filepath.Join(base, "groups/b")

	removed, err := Remove(b, "link")
	require.NoError(t, err)
	assert.True(t, removed)
	assert.FileExists(t, filepath.Join(b, "secret"), "a symlink is removed, not its target")
	assert.NoFileExists(t, filepath.Join(b, "link"))

	removed, err = Remove(b, "link")
	require.NoError(t, err)
	assert.False(t, removed, "already gone")

	_, err = Remove(filepath.Join(base, "groups/a/tob"), "secret")
	require.ErrorIs(t, err, unix.ELOOP)
	assert.FileExists(t, filepath.Join(b, "secret"), "nothing removed through a swapped parent")

	for _, name := range []string{"", ".", "..", "sub/passwd"} {
		_, err := Remove(b, name)
		require.Error(t, err, "%q", name)
	}
	assert.FileExists(t, filepath.Join(b, "sub/passwd"))
}
