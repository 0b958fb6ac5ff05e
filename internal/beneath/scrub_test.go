package beneath

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// entry is one planted file system entry: a regular file unless dir,
// link (a symlink to link) or fifo.
type entry struct {
	path string
	mode os.FileMode // permission and setuid/setgid/sticky bits
	dir  bool
	link string
	fifo bool
}

func plant(t testing.TB, root string, es ...entry) {
	t.Helper()
	for _, e := range es {
		p := filepath.Join(root, e.path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch {
		case e.dir:
			require.NoError(t, os.Mkdir(p, 0o755))
		case e.link != "":
			require.NoError(t, os.Symlink(e.link, p))
			continue
		case e.fifo:
			require.NoError(t, unix.Mkfifo(p, 0o600))
		default:
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		}
		// os.Chmod drops nothing, unlike the umask of a create.
		require.NoError(t, unix.Chmod(p, uint32(e.mode.Perm())|modeBits(e.mode)))
	}
}

func modeBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= unix.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		b |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		b |= unix.S_ISVTX
	}
	return b
}

func mode(t testing.TB, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(p, &st))
	return st.Mode & 0o7777
}

func TestStrip(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "group"), filepath.Join(base, "outside")
	plant(t, outside, entry{path: "suid", mode: 0o755 | os.ModeSetuid}, entry{path: "dir/suid", mode: 0o755 | os.ModeSetuid})
	plant(t, root,
		entry{path: "suid", mode: 0o755 | os.ModeSetuid},
		entry{path: "sgid", mode: 0o750 | os.ModeSetgid},
		entry{path: "both", mode: 0o777 | os.ModeSetuid | os.ModeSetgid},
		entry{path: "ww", mode: 0o666},
		entry{path: "plain", mode: 0o644},
		entry{path: "private", mode: 0o000},
		entry{path: "wwdir", dir: true, mode: 0o777},
		entry{path: "wwdir/suid", mode: 0o755 | os.ModeSetuid},
		entry{path: "sgiddir", dir: true, mode: 0o775 | os.ModeSetgid},
		entry{path: "stickydir", dir: true, mode: 0o777 | os.ModeSticky},
		entry{path: "fifo", fifo: true, mode: 0o666},
		entry{path: "a/b/c/d/deep", mode: 0o755 | os.ModeSetuid},
		entry{path: "link-out", link: filepath.Join(outside, "suid")},
		entry{path: "link-dir", link: filepath.Join(outside, "dir")},
	)
	require.NoError(t, unix.Chmod(root, 0o777|unix.S_ISGID))

	rep, err := Strip(context.Background(), root, -1, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Empty(t, rep.CutShort)
	assert.Equal(t, 11, rep.Changed, "%+v", rep)

	want := map[string]uint32{
		".": 0o775, "suid": 0o755, "sgid": 0o750, "both": 0o775, "ww": 0o664, "plain": 0o644, "private": 0,
		"wwdir": 0o775, "wwdir/suid": 0o755, "sgiddir": 0o775, "stickydir": 0o1775, "fifo": 0o664, "a/b/c/d/deep": 0o755,
	}
	for p, m := range want {
		assert.Equal(t, strconv.FormatUint(uint64(m), 8), strconv.FormatUint(uint64(mode(t, filepath.Join(root, p))), 8), p)
	}
	// Symlinks were not followed: what they point at keeps its bits.
	assert.Equal(t, uint32(0o4755), mode(t, filepath.Join(outside, "suid")))
	assert.Equal(t, uint32(0o4755), mode(t, filepath.Join(outside, "dir", "suid")))

	rep, err = Strip(context.Background(), root, -1, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Zero(t, rep.Changed, "a second walk finds nothing")
}

func TestStripRootMustNotBeASymlink(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(base, "real"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")))
	_, err := Strip(context.Background(), filepath.Join(base, "link"), -1, DefaultWalkLimits)
	require.Error(t, err)
}

func TestStripFileRoot(t *testing.T) {
	base := t.TempDir()
	plant(t, base, entry{path: "one", mode: 0o777 | os.ModeSetuid})
	rep, err := Strip(context.Background(), filepath.Join(base, "one"), -1, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Changed)
	assert.Equal(t, uint32(0o775), mode(t, filepath.Join(base, "one")))
}

func TestStripOnlyOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as someone else")
	}
	root := t.TempDir()
	plant(t, root, entry{path: "mine", mode: 0o755 | os.ModeSetuid}, entry{path: "theirs", mode: 0o755 | os.ModeSetgid},
		entry{path: "theirs-dir", dir: true, mode: 0o775 | os.ModeSetgid})
	require.NoError(t, os.Lchown(filepath.Join(root, "mine"), 4242, 4242))
	// chown clears the bits; set them again afterwards.
	require.NoError(t, unix.Chmod(filepath.Join(root, "mine"), 0o4755))

	rep, err := Strip(context.Background(), root, 4242, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Changed)
	assert.Equal(t, uint32(0o755), mode(t, filepath.Join(root, "mine")))
	assert.Equal(t, uint32(0o2755), mode(t, filepath.Join(root, "theirs")), "another user's bits are left alone")
	assert.Equal(t, uint32(0o2775), mode(t, filepath.Join(root, "theirs-dir")))
}

func TestStripLimits(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		root := t.TempDir()
		for i := range 20 {
			plant(t, root, entry{path: "f" + strconv.Itoa(i), mode: 0o666})
		}
		rep, err := Strip(context.Background(), root, -1, WalkLimits{Entries: 10})
		require.NoError(t, err)
		assert.Contains(t, rep.CutShort, "entry limit of 10")
		assert.Equal(t, 10, rep.Entries)
	})
	t.Run("depth", func(t *testing.T) {
		root := t.TempDir()
		plant(t, root, entry{path: "a/shallow", mode: 0o666}, entry{path: "a/b/c/deep", mode: 0o666}, entry{path: "z", mode: 0o666})
		rep, err := Strip(context.Background(), root, -1, WalkLimits{Depth: 2})
		require.NoError(t, err)
		assert.Contains(t, rep.CutShort, "depth limit of 2")
		assert.Equal(t, uint32(0o664), mode(t, filepath.Join(root, "a/shallow")))
		assert.Equal(t, uint32(0o664), mode(t, filepath.Join(root, "z")), "the other branches are still walked")
		assert.Equal(t, uint32(0o666), mode(t, filepath.Join(root, "a/b/c/deep")), "below the limit")
	})
	t.Run("time", func(t *testing.T) {
		root := t.TempDir()
		for i := range 600 {
			plant(t, root, entry{path: "f" + strconv.Itoa(i), mode: 0o644})
		}
		rep, err := Strip(context.Background(), root, -1, WalkLimits{Time: 1})
		require.NoError(t, err)
		assert.Contains(t, rep.CutShort, "time limit")
	})
	t.Run("cancelled", func(t *testing.T) {
		root := t.TempDir()
		plant(t, root, entry{path: "f", mode: 0o666})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rep, err := Strip(ctx, root, -1, DefaultWalkLimits)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(rep.CutShort, "cancelled"), rep.CutShort)
	})
}

// TestStripHiddenInUnreadableDir: a sandbox running as the host's own user
// (a non-root host) may make a directory unreadable to hide what is in it.
func TestStripHiddenInUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory")
	}
	root := t.TempDir()
	plant(t, root, entry{path: "locked/suid", mode: 0o755 | os.ModeSetuid})
	require.NoError(t, os.Chmod(filepath.Join(root, "locked"), 0))
	rep, err := Strip(context.Background(), root, -1, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Equal(t, uint32(0o755), mode(t, filepath.Join(root, "locked/suid")), "%+v", rep)
}

func TestHandOver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	base := t.TempDir()
	root, outside := filepath.Join(base, "group"), filepath.Join(base, "outside")
	plant(t, outside, entry{path: "victim", mode: 0o666}, entry{path: "target", mode: 0o644})
	plant(t, root,
		entry{path: "f", mode: 0o644},
		entry{path: "suid", mode: 0o755 | os.ModeSetuid},
		entry{path: "d/e", mode: 0o644},
		entry{path: "link", link: filepath.Join(outside, "target")},
	)
	require.NoError(t, os.Link(filepath.Join(outside, "victim"), filepath.Join(root, "hardlink")))

	rep, err := HandOver(context.Background(), root, 4243, 4244, DefaultWalkLimits)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Skipped, "%+v", rep)
	for _, p := range []string{".", "f", "suid", "d", "d/e", "link"} {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(filepath.Join(root, p), &st))
		assert.Equal(t, [2]uint32{4243, 4244}, [2]uint32{st.Uid, st.Gid}, p)
	}
	assert.Equal(t, uint32(0o755), mode(t, filepath.Join(root, "suid")), "chown drops setuid")
	for _, p := range []string{filepath.Join(outside, "victim"), filepath.Join(outside, "target")} {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "%s stays root's", p)
	}
}

// BenchmarkStrip walks a tree of 10,000 files in 100 directories, none
// needing a change (the common case after a run).
func BenchmarkStrip(b *testing.B) {
	root := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(root, "d"+strconv.Itoa(d))
		require.NoError(b, os.Mkdir(dir, 0o755))
		for f := range 100 {
			require.NoError(b, os.WriteFile(filepath.Join(dir, strconv.Itoa(f)), nil, 0o644))
		}
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := Strip(context.Background(), root, -1, DefaultWalkLimits)
		if err != nil || rep.Entries != 10_101 {
			b.Fatal(err, rep)
		}
	}
}

// TestRefusesASymlinkAboveTheRoot: the root is a path the host resolved
// (a writable sub-path of an extra mount); a directory above it swapped for
// a symlink since, to another group's folder or to /etc, is refused: nothing
// there is visited, stripped or handed over.
func TestRefusesASymlinkAboveTheRoot(t *testing.T) {
	base := t.TempDir()
	other := filepath.Join(base, "groups", "other")
	plant(t, other, entry{path: "w/suid", mode: 0o755 | os.ModeSetuid}, entry{path: "w/dir", dir: true, mode: 0o777})
	mount := filepath.Join(base, "mount")
	require.NoError(t, os.MkdirAll(mount, 0o755))
	require.NoError(t, os.Symlink(other, filepath.Join(mount, "sub")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(mount, "etc")))
	owner := func(p string) (int, int) {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(p, &st))
		return int(st.Uid), int(st.Gid)
	}
	// Against /etc, operations that would change nothing even if followed:
	// only the refusal is observed, on a real host's /etc.
	passwdUID, passwdGID := owner("/etc/passwd")

	for _, tc := range []struct {
		name string
		run  func() (WalkReport, error)
	}{
		{"strip, another group's folder", func() (WalkReport, error) {
			return Strip(context.Background(), filepath.Join(mount, "sub", "w"), -1, DefaultWalkLimits)
		}},
		{"hand over, another group's folder", func() (WalkReport, error) {
			return HandOver(context.Background(), filepath.Join(mount, "sub", "w"), os.Geteuid()+1, os.Getegid()+1, DefaultWalkLimits)
		}},
		{"strip, /etc", func() (WalkReport, error) {
			return Strip(context.Background(), filepath.Join(mount, "etc", "passwd"), passwdUID+1, DefaultWalkLimits)
		}},
		{"hand over, /etc", func() (WalkReport, error) {
			return HandOver(context.Background(), filepath.Join(mount, "etc", "passwd"), passwdUID, passwdGID, DefaultWalkLimits)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := tc.run()
			require.ErrorIs(t, err, unix.ELOOP)
			assert.Zero(t, rep.Entries, "nothing visited")
		})
	}
	assert.Equal(t, uint32(0o4755), mode(t, filepath.Join(other, "w", "suid")))
	assert.Equal(t, uint32(0o777), mode(t, filepath.Join(other, "w", "dir")))
	uid, gid := owner(filepath.Join(other, "w", "suid"))
	assert.Equal(t, [2]int{os.Geteuid(), os.Getegid()}, [2]int{uid, gid})
}
