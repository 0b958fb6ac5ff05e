package app

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/config"
)

// The parents of the trees sandboxes write are the host's alone, as serve
// leaves them at start and doctor checks them: the groups dir 0710 root:<the
// sandbox user's group> (0700 on a host that is not root), data/sessions
// 0700, each without an ACL that would let a named user through; before,
// a groups dir as git makes it (0755, a person's) let anyone walk in.
func TestPrivateParents(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	cfg := config.Config{GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), SandboxUser: "clawpen-sandbox"}
	for _, d := range []string{cfg.GroupsDir, filepath.Join(cfg.DataDir, "sessions")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.Chmod(d, 0o755))
	}
	const sandboxGID = 4714
	root := os.Geteuid() == 0
	if root {
		require.NoError(t, os.Chown(cfg.GroupsDir, 4800, 4800)) // a person's checkout
		// An ACL letting uid 4800 in, whatever the mode.
		require.NoError(t, unix.Setxattr(cfg.GroupsDir, "system.posix_acl_access", acl(0o7, 4800, 0o5, 0o5, 0o5, 0o5), 0))
	}

	f := privateFinding(cfg, sandboxGID)
	require.Equal(t, OK, f.Verdict, "%+v", f)
	wantMode, wantGID := uint32(0o700), uint32(os.Getegid())
	if root {
		wantMode, wantGID = 0o710, sandboxGID
	}
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(cfg.GroupsDir, &st))
	assert.Equal(t, wantMode, st.Mode&0o7777)
	assert.Equal(t, []uint32{uint32(os.Geteuid()), wantGID}, []uint32{st.Uid, st.Gid})
	_, err := unix.Getxattr(cfg.GroupsDir, "system.posix_acl_access", nil)
	assert.ErrorIs(t, err, unix.ENODATA, "the ACL is gone")
	require.NoError(t, unix.Lstat(filepath.Join(cfg.DataDir, "sessions"), &st))
	assert.Equal(t, uint32(0o700), st.Mode&0o7777)

	// A groups dir swapped for a symlink is refused, not made private there.
	require.NoError(t, os.Rename(cfg.GroupsDir, cfg.GroupsDir+".real"))
	require.NoError(t, os.Symlink(cfg.GroupsDir+".real", cfg.GroupsDir))
	f = privateFinding(cfg, sandboxGID)
	assert.Equal(t, Fail, f.Verdict, "%+v", f)
	assert.Contains(t, f.Fix, "serve makes them so")
}

// acl is a POSIX access ACL as the kernel stores it: owner, one named user,
// group, mask and other.
func acl(owner uint16, user uint32, userPerm, group, mask, other uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2) // version
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, owner, ^uint32(0)}, {0x02, userPerm, user}, {0x04, group, ^uint32(0)}, {0x10, mask, ^uint32(0)}, {0x20, other, ^uint32(0)}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}
