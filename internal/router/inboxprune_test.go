package router

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// What a group could set up in its own folder to make the host's inbox
// pruning delete something else: the inbox, or the group's folder, swapped
// for a symlink to another group's folder; an old-named symlink to a host
// file; an old-named directory. Only the group's own old files go.
func TestPruneInbox(t *testing.T) {
	root := t.TempDir()
	groups := filepath.Join(root, "groups")
	cutoff := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(p, content string) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	otherOld := mk(filepath.Join(groups, "other", "inbox", "20000101-000000-5.txt"), "other's")
	otherTop := mk(filepath.Join(groups, "other", "20000101-000000-6.txt"), "other's")
	hostFile := mk(filepath.Join(root, "host", "20000101-000000-7.txt"), "host's")

	own := filepath.Join(groups, "fam", "inbox")
	oldFile := mk(filepath.Join(own, "20000101-000000-1.jpg"), "old")
	newFile := mk(filepath.Join(own, "20990101-000000-2.jpg"), "new")
	otherName := mk(filepath.Join(own, "notes-20000101.txt"), "not ours")
	partial := mk(filepath.Join(own, ".20000101-000000-9.jpg.part"), "being written")
	oldDir := mk(filepath.Join(own, "20000101-000000-4.txt", "inside"), "dir")
	link := filepath.Join(own, "20000101-000000-3.txt")
	require.NoError(t, os.Symlink(hostFile, link))

	// The inbox, or the whole group folder, is a symlink to another's.
	require.NoError(t, os.MkdirAll(filepath.Join(groups, "evil"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(groups, "other", "inbox"), filepath.Join(groups, "evil", "inbox")))
	require.NoError(t, os.Symlink(filepath.Join(groups, "other"), filepath.Join(groups, "evil2")))
	require.NoError(t, os.Symlink(filepath.Join(root, "host"), filepath.Join(groups, "evil3")))

	tests := []struct {
		name    string
		dir     string
		removed int
		wantErr bool
	}{
		{"own inbox", own, 2, false},
		{"inbox is a symlink to another group's", filepath.Join(groups, "evil", "inbox"), 0, true},
		{"group folder is a symlink to another group's", filepath.Join(groups, "evil2", "inbox"), 0, true},
		{"group folder is a symlink to a host directory", filepath.Join(groups, "evil3"), 0, true},
		{"no inbox", filepath.Join(groups, "empty", "inbox"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := PruneInbox(tt.dir, cutoff)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.removed, n)
		})
	}
	for _, p := range []string{otherOld, otherTop, hostFile, newFile, otherName, partial, oldDir} {
		assert.FileExists(t, p)
	}
	assert.NoFileExists(t, oldFile)
	_, err := os.Lstat(link)
	assert.True(t, os.IsNotExist(err), "the old-named symlink itself is removed")
}

// Every name inboxName makes is one the prune reads back, at its time;
// nothing else is.
func TestInboxTime(t *testing.T) {
	at := time.Date(2024, 1, 31, 23, 59, 59, 0, time.UTC)
	made := inboxName(domain.Inbound{Time: at, MessageID: 42}, &domain.InFile{Name: "Report.PDF", Type: "document"})
	got, ok := inboxTime(made)
	require.True(t, ok, made)
	assert.Equal(t, at, got)

	for _, name := range []string{"20240131-235959-42", "20240131-235959-.jpg", "20240131-235959-4x.jpg",
		"20240132-000000-1.jpg", "20240131-235959-1.JPG", "x20240131-235959-1.jpg", "20240131-235959-1.jpg/..",
		".20240131-235959-1.jpg.part", "20240131-235959-1.tar.gz"} {
		_, ok := inboxTime(name)
		assert.False(t, ok, name)
	}
}
