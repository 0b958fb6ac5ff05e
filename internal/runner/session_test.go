package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/hostsock"
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

// Before a run that may compact, the host copies the transcript as it is;
// what the sandbox planted instead of one is not copied, nor one that
// would take the group's archive past its limit.
func TestArchiveCopy(t *testing.T) {
	data := t.TempDir()
	session := SessionDir(data, "team")
	require.NoError(t, os.MkdirAll(session, 0o700))
	transcript := filepath.Join(session, domain.TranscriptFile)
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	copies := func() []string {
		es, _ := os.ReadDir(ArchiveDir(data, "team"))
		var out []string
		for _, e := range es {
			b, err := os.ReadFile(filepath.Join(ArchiveDir(data, "team"), e.Name()))
			require.NoError(t, err)
			out = append(out, e.Name()+"="+string(b))
		}
		return out
	}

	require.NoError(t, os.WriteFile(transcript, []byte(`{"v":1,"messages":["every turn"]}`), 0o600))
	require.NoError(t, ArchiveCopy(data, "team", 1<<20, now))
	assert.Equal(t, []string{`20260504T100000.000000000Z-before-compaction-transcript.json={"v":1,"messages":["every turn"]}`}, copies())
	b, err := os.ReadFile(transcript)
	require.NoError(t, err)
	assert.Contains(t, string(b), "every turn", "a copy: the run still has its conversation")

	secret := filepath.Join(data, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("HOST SECRET"), 0o600))
	require.NoError(t, os.Remove(transcript))
	require.NoError(t, os.Symlink(secret, transcript))
	assert.Error(t, ArchiveCopy(data, "team", 1<<20, now.Add(time.Second)), "a symlink is not followed")
	require.NoError(t, os.Remove(transcript))
	require.NoError(t, unix.Mkfifo(transcript, 0o600))
	assert.ErrorContains(t, ArchiveCopy(data, "team", 1<<20, now.Add(2*time.Second)), "not a regular file")
	require.NoError(t, os.Remove(transcript))
	require.NoError(t, os.WriteFile(transcript, make([]byte, 1<<20), 0o600))
	assert.ErrorContains(t, ArchiveCopy(data, "team", 1<<20, now.Add(3*time.Second)), "would pass the group's 1 MiB")
	require.NoError(t, os.Truncate(transcript, maxArchiveCopy+1))
	assert.ErrorContains(t, ArchiveCopy(data, "team", 0, now.Add(4*time.Second)), "larger than 16 MiB")
	assert.Len(t, copies(), 1, "nothing more was archived")
	for _, c := range copies() {
		assert.NotContains(t, c, "HOST SECRET")
	}
}

// A conversation driven past a small budget through the real agent and
// socket: the run that may compact is archived first, the agent makes one
// summary request, and the archive holds every earlier turn.
func TestLongConversationArchivedThenCompacted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	r := New(Config{
		GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
		Model: "claude-test", Upstreams: hostsock.Config{Anthropic: hostsock.Upstream{BaseURL: llm.URL()}},
		ContextTokens: 1000, Logger: slog.New(slog.DiscardHandler),
	}, &inProcess{})
	g := domain.Group{Folder: "family", ChatID: -5}
	pad := strings.Repeat("words ", 400)
	summaries := func() int {
		n := 0
		for _, q := range llm.Requests() {
			if strings.HasPrefix(q.Messages[0].Text(), "<conversation>") {
				n++
			}
		}
		return n
	}
	for i := 1; summaries() == 0; i++ {
		require.Less(t, i, 10, "no compaction after 10 runs")
		_, err := r.Start(ctx, Request{Group: g, Prompt: fmt.Sprintf("FACT-%d %s REPLY ok", i, pad), ContextMode: domain.ContextGroup}).Wait()
		require.NoError(t, err)
	}
	assert.Equal(t, 1, summaries())
	es, err := os.ReadDir(ArchiveDir(filepath.Join(dir, "data"), "family"))
	require.NoError(t, err)
	require.NotEmpty(t, es)
	last, err := os.ReadFile(filepath.Join(ArchiveDir(filepath.Join(dir, "data"), "family"), es[len(es)-1].Name()))
	require.NoError(t, err)
	reqs := llm.Requests()
	for _, want := range factRe.FindAllString(reqs[len(reqs)-2].Messages[0].Text(), -1) {
		assert.Contains(t, string(last), want, "the archive holds every turn the summary replaced")
	}
}

var factRe = regexp.MustCompile(`FACT-\d+`)
