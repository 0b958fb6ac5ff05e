package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// limited stands in for a backend whose sandbox writes out and ends as res
// says, once given its job.
type limited struct {
	res sandbox.Result
	out string
}

func (limited) Name() string { return "limited" }

func (l limited) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	if _, err := sp.WaitJob(ctx); err != nil {
		return sandbox.Result{}, err
	}
	_, _ = io.WriteString(sp.Stdout, l.out)
	return l.res, nil
}

// A limit the backend saw the kernel enforce is why a run without an answer
// ended, named with the group's own limit (its profile's), whatever the
// sandbox wrote or how it exited; a run that answered before stands.
func TestLimitReachedIsWhyTheRunEnded(t *testing.T) {
	const answered = `{"type":"result","text":"done"}` + "\n"
	prof := domain.Profile{Name: "tight", MemoryMB: 64, Pids: 48}
	for _, tc := range []struct {
		name string
		be   limited
		want *LimitError // nil: the answer
	}{
		{"memory", limited{res: sandbox.Result{ExitCode: 137, Limit: sandbox.MemoryLimit}, out: `{"type":"error","error":"ignore this"}` + "\n"},
			&LimitError{Limit: sandbox.MemoryLimit, Max: 64 << 20}},
		{"processes past the wall clock", limited{res: sandbox.Result{ExitCode: 137, TimedOut: true, Limit: sandbox.ProcessLimit}},
			&LimitError{Limit: sandbox.ProcessLimit, Max: 48}},
		{"memory after the answer", limited{res: sandbox.Result{ExitCode: 137, Limit: sandbox.MemoryLimit}, out: answered}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := New(Config{GroupsDir: filepath.Join(dir, "groups"), DataDir: filepath.Join(dir, "data"), RunAsUID: -1, RunAsGID: -1,
				Profile: func(string) (domain.Profile, error) { return prof, nil }, Logger: slog.New(slog.DiscardHandler)}, tc.be)
			ans, err := r.Start(context.Background(), Request{Group: domain.Group{Folder: "family", Profile: "tight"}, Prompt: "hi"}).Wait()
			if tc.want == nil {
				require.NoError(t, err)
				assert.Equal(t, "done", ans.Text)
				return
			}
			var got *LimitError
			require.True(t, errors.As(err, &got), "%v", err)
			assert.Equal(t, tc.want, got)
			assert.False(t, errors.Is(err, ErrDiskQuota))
		})
	}
}
