package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

	s, err := NewPinSet(filepath.Join(base, "pins"), "inv1")
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
	s, err := NewPinSet(root, "inv1")
	require.NoError(t, err)
	_, err = s.Add(src)
	require.NoError(t, err)
	// No Release: a crash. Clean unmounts and removes.
	require.NoError(t, CleanPins(root))
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries)
	assert.DirExists(t, src, "the original is untouched")
}

// mountOptions are the per-mount options of the mount at p, from
// /proc/self/mountinfo.
func mountOptions(t *testing.T, p string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var opts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == p {
			opts = strings.Split(f[5], ",") // the last mount at p wins
		}
	}
	require.NotNil(t, opts, "no mount at %s", p)
	return opts
}

func TestPinIsNosuidNodev(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	s, err := NewPinSet(filepath.Join(base, "pins"), "inv1")
	require.NoError(t, err)
	defer s.Release()
	staged, err := s.Add(src)
	require.NoError(t, err)
	opts := mountOptions(t, staged)
	assert.Contains(t, opts, "nosuid")
	assert.Contains(t, opts, "nodev")
	assert.Contains(t, opts, "rw")
}

// TestIDMappedPin: through the pin, what uid 1000 writes lands on disk as
// the disk user, the disk user's files show as 1000, and anyone else's as
// nobody; a read-only pin takes no writes.
func TestIDMappedPin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	const disk, view = 4711, 1000
	base := t.TempDir()
	// uid 1000 must reach the pins.
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	require.NoError(t, os.Chmod(base, 0o755))
	src, ro := filepath.Join(base, "src"), filepath.Join(base, "ro")
	for _, d := range []string{src, ro} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.Chown(d, disk, disk))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "roots"), []byte("x"), 0o644))

	m, err := NewIDMap(disk, disk, view, view)
	require.NoError(t, err)
	defer m.Close()
	s, err := NewPinSet(filepath.Join(base, "pins"), "inv1")
	require.NoError(t, err)
	defer s.Release()
	require.NoError(t, os.Chmod(filepath.Join(base, "pins"), 0o755))
	staged, err := s.AddWith(src, PinOptions{IDMap: m})
	require.NoError(t, err)
	stagedRO, err := s.AddWith(ro, PinOptions{IDMap: m, ReadOnly: true})
	require.NoError(t, err)
	assert.Subset(t, mountOptions(t, staged), []string{"rw", "nosuid", "nodev", "idmapped"})
	assert.Subset(t, mountOptions(t, stagedRO), []string{"ro", "nosuid", "nodev", "idmapped"})

	asView := func(script string) error {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: view, Gid: view, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	require.NoError(t, asView("echo hi > "+staged+"/new && mkdir "+staged+"/d"))
	for _, p := range []string{"new", "d"} {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(filepath.Join(src, p), &st))
		assert.Equal(t, [2]uint32{disk, disk}, [2]uint32{st.Uid, st.Gid}, "%s on disk", p)
	}
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(staged, &st))
	assert.Equal(t, uint32(view), st.Uid, "the disk user's folder shows as the view uid")
	require.NoError(t, syscall.Stat(filepath.Join(staged, "roots"), &st))
	assert.Equal(t, uint32(65534), st.Uid, "root's file shows as nobody")
	assert.Error(t, asView("echo x >> "+staged+"/roots"), "nobody's file is not writable")
	assert.Error(t, asView("touch "+stagedRO+"/x"), "a read-only pin takes no writes")
	assert.NoFileExists(t, filepath.Join(ro, "x"))
}

func TestNewIDMapRefusesRoot(t *testing.T) {
	_, err := NewIDMap(0, 0, 1000, 1000)
	require.Error(t, err)
}

// BenchmarkPinSet pins four directories and releases them, as one run of a
// root host does for its group folder, global, session dir and one extra
// mount: plain (bwrap) and idmapped (Docker).
func BenchmarkPinSet(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pinning needs root")
	}
	base := b.TempDir()
	var srcs []string
	for i := range 4 {
		p := filepath.Join(base, "src", strconv.Itoa(i))
		require.NoError(b, os.MkdirAll(p, 0o755))
		srcs = append(srcs, p)
	}
	m, err := NewIDMap(4711, 4711, 1000, 1000)
	require.NoError(b, err)
	defer m.Close()
	for _, bc := range []struct {
		name string
		o    PinOptions
	}{{"plain", PinOptions{}}, {"idmapped", PinOptions{IDMap: m}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				s, err := NewPinSet(filepath.Join(base, "pins"), "inv")
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range srcs {
					if _, err := s.AddWith(p, bc.o); err != nil {
						b.Fatal(err)
					}
				}
				s.Release()
			}
		})
	}
}

// BenchmarkNewIDMap is the one-off cost of the user namespace (per backend).
func BenchmarkNewIDMap(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	for b.Loop() {
		m, err := NewIDMap(4711, 4711, 1000, 1000)
		if err != nil {
			b.Fatal(err)
		}
		_ = m.Close()
	}
}

// TestPinRefusesASymlinkAboveTheSource: a writable sub-path of an extra
// mount, validated and resolved, whose parent was swapped for a symlink
// since (to another group's folder, to /etc), is not pinned: the sandbox
// would get what the symlink points at.
func TestPinRefusesASymlinkAboveTheSource(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	base := t.TempDir()
	other := filepath.Join(base, "groups", "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "w"), 0o755))
	mount := filepath.Join(base, "mount")
	require.NoError(t, os.MkdirAll(mount, 0o755))
	require.NoError(t, os.Symlink(other, filepath.Join(mount, "sub")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(mount, "etc")))

	s, err := NewPinSet(filepath.Join(base, "pins"), "inv1")
	require.NoError(t, err)
	defer s.Release()
	for _, src := range []string{filepath.Join(mount, "sub", "w"), filepath.Join(mount, "etc", "passwd")} {
		staged, err := s.AddWith(src, PinOptions{ReadOnly: true})
		assert.Error(t, err, src)
		assert.Empty(t, staged, src)
	}
	entries, err := os.ReadDir(s.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing staged")
}
