package pin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPinSurvivesSwapAndReleases(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "MARK"), []byte("x"), 0o644))
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("FILE"), 0o644))
	require.NoError(t, os.Symlink("/", filepath.Join(base, "link")))

	s, err := NewSet(filepath.Join(base, "pins"), "inv1")
	require.NoError(t, err)
	dir, err := s.Add(src)
	require.NoError(t, err)
	f, err := s.Add(file)
	require.NoError(t, err)
	_, err = s.Add(filepath.Join(base, "link"))
	assert.Error(t, err, "a symlink is never pinned")

	// Swap the original for a symlink to /: the pin still shows the original.
	require.NoError(t, os.Rename(src, src+".moved"))
	require.NoError(t, os.Symlink("/", src))
	assert.FileExists(t, filepath.Join(dir, "MARK"))
	assert.NoDirExists(t, filepath.Join(dir, "etc"))
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "FILE", string(data))

	s.Release()
	assert.NoDirExists(t, s.Dir)
}

func TestCleanAfterCrash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	root := filepath.Join(base, "pins")
	s, err := NewSet(root, "inv1")
	require.NoError(t, err)
	_, err = s.Add(src)
	require.NoError(t, err)
	// No Release: a crash. Clean unmounts and removes.
	require.NoError(t, Clean(root))
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries)
	assert.DirExists(t, src, "the original is untouched")
}
