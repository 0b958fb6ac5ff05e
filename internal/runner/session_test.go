package runner

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func TestArchiveTranscript(t *testing.T) {
	data := t.TempDir()
	session := SessionDir(data, "team")
	require.NoError(t, os.MkdirAll(session, 0o700))
	other := filepath.Join(data, "other.json")
	require.NoError(t, os.WriteFile(other, []byte("not the session's"), 0o600))
	notes := filepath.Join(session, "notes.md")
	require.NoError(t, os.WriteFile(notes, []byte("kept"), 0o600))

	archived := func() []string {
		var out []string
		es, _ := os.ReadDir(ArchiveDir(data, "team"))
		for _, e := range es {
			b, err := os.ReadFile(filepath.Join(ArchiveDir(data, "team"), e.Name()))
			require.NoError(t, err, "only regular files are archived")
			out = append(out, string(b))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		plant    func(t *testing.T)
		forgot   bool
		archived []string // what the archive holds after it
	}{
		{"transcript", func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(session, domain.TranscriptFile), []byte(`{"v":1}`), 0o600))
		}, true, []string{`{"v":1}`}},
		{"one set aside as broken", func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(session, domain.BrokenTranscriptFile), []byte(`{`), 0o600))
		}, true, []string{`{"v":1}`, `{`}},
		{"a symlink in place of the transcript: gone, not archived, its target kept", func(t *testing.T) {
			require.NoError(t, os.Symlink(other, filepath.Join(session, domain.TranscriptFile)))
		}, true, []string{`{"v":1}`, `{`}},
		{"nothing saved", func(*testing.T) {}, false, []string{`{"v":1}`, `{`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.plant(t)
			forgot, err := ArchiveTranscript(data, "team", time.Now())
			require.NoError(t, err)
			assert.Equal(t, tc.forgot, forgot)
			for _, name := range []string{domain.TranscriptFile, domain.BrokenTranscriptFile} {
				_, err := os.Lstat(filepath.Join(session, name))
				assert.ErrorIs(t, err, os.ErrNotExist, name)
			}
			assert.FileExists(t, other)
			assert.FileExists(t, notes, "the rest of the session is kept")
			assert.ElementsMatch(t, tc.archived, archived(), "forgotten conversations are archived, not deleted")
		})
	}

	forgot, err := ArchiveTranscript(data, "never-ran", time.Now())
	require.NoError(t, err)
	assert.False(t, forgot)
	_, err = ArchiveTranscript(data, "../team", time.Now())
	require.Error(t, err)
	_, err = ArchiveTranscript(data, "global", time.Now())
	require.Error(t, err)

	mainSession := SessionDir(data, "main")
	require.NoError(t, os.MkdirAll(mainSession, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(mainSession, domain.TranscriptFile), nil, 0o600))
	forgot, err = ArchiveTranscript(data, "main", time.Now())
	require.NoError(t, err)
	assert.True(t, forgot, "main's conversation is forgotten too")
}

// TestArchiveTranscriptRefusesASymlinkAboveIt: a session dir reached through
// a symlink (data/sessions swapped for one to another group's sessions) is
// not touched.
func TestArchiveTranscriptRefusesASymlinkAboveIt(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim", "sessions", "team")
	require.NoError(t, os.MkdirAll(victim, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(victim, domain.TranscriptFile), []byte(`{"v":1}`), 0o600))
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	require.NoError(t, os.Symlink(filepath.Join(base, "victim", "sessions"), filepath.Join(data, "sessions")))

	_, err := ArchiveTranscript(data, "team", time.Now())
	require.ErrorIs(t, err, unix.ELOOP)
	assert.FileExists(t, filepath.Join(victim, domain.TranscriptFile))
}

// saver stands in for an agent that saves its conversation as its run ends,
// after the test lets it.
type saver struct {
	started, release chan struct{}
}

func (saver) Name() string { return "saver" }

func (s saver) Run(_ context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	close(s.started)
	<-s.release
	if err := os.WriteFile(filepath.Join(sp.SessionDir, domain.TranscriptFile), []byte(`{"v":1}`), 0o600); err != nil {
		return sandbox.Result{}, err
	}
	_, _ = io.WriteString(sp.Stdout, `{"type":"result","text":"ok"}`+"\n")
	return sandbox.Result{}, nil
}

// TestForgetDuringARun: /new while the group's agent runs forgets what that
// run saves as it ends too; the next /new-free run's save is kept.
func TestForgetDuringARun(t *testing.T) {
	dir := t.TempDir()
	sb := saver{started: make(chan struct{}), release: make(chan struct{})}
	r := New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: -1, RunAsGID: -1}, sb)
	g := domain.Group{Folder: "team", ChatID: -5}
	done := make(chan error, 1)
	go func() {
		_, err := r.Start(context.Background(), Request{Group: g}).Wait()
		done <- err
	}()
	<-sb.started
	_, err := r.Forget("team")
	require.NoError(t, err)
	close(sb.release)
	require.NoError(t, <-done)
	transcript := filepath.Join(SessionDir(dir+"/data", "team"), domain.TranscriptFile)
	assert.NoFileExists(t, transcript, "the run's save is forgotten once it ended")

	sb = saver{started: make(chan struct{}), release: make(chan struct{})}
	close(sb.release)
	r.sandbox = sb
	_, err = r.Start(context.Background(), Request{Group: g}).Wait()
	require.NoError(t, err)
	assert.FileExists(t, transcript, "a later run's conversation is kept")
}
