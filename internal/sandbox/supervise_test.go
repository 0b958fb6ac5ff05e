package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProc is a sandbox that runs until it is killed or exits by itself.
type fakeProc struct {
	exit     chan int
	kills    atomic.Int32
	ended    atomic.Bool
	lateKill atomic.Bool // Kill ran after ended
}

func (p *fakeProc) Start() error { return nil }
func (p *fakeProc) Ready() error { return nil }
func (p *fakeProc) Kill() {
	if p.ended.Load() {
		p.lateKill.Store(true)
	}
	if p.kills.Add(1) == 1 {
		p.exit <- 137
	}
}

func (p *fakeProc) Wait(ended func()) (int, error) {
	code := <-p.exit
	ended()
	p.ended.Store(true)
	return code, nil
}
func (p *fakeProc) Resize(WinSize)       {}
func (p *fakeProc) Finish(*Result) error { return nil }

func superviseFake(t *testing.T, spec Spec) (*fakeProc, Result, error) {
	t.Helper()
	p := &fakeProc{exit: make(chan int, 1)}
	outR, outW := io.Pipe()
	st := Streams{In: io.Discard, CloseIn: func() {}, Out: outR, Close: func() { _ = outW.Close() }}
	go func() {
		// The streams end with the sandbox.
		for !p.ended.Load() {
			time.Sleep(time.Millisecond)
		}
		_ = outW.Close()
	}()
	res, err := Supervise(context.Background(), spec, p, st, slog.New(slog.DiscardHandler))
	return p, res, err
}

func TestSuperviseJobErrorEndsTheSandboxUnused(t *testing.T) {
	p, res, err := superviseFake(t, Spec{Job: func(context.Context) ([]byte, error) { return nil, errors.New("no job") }})
	require.ErrorIs(t, err, ErrUnused)
	assert.Equal(t, int32(1), p.kills.Load())
	assert.False(t, res.TimedOut)
}

func TestSuperviseSandboxEndedBeforeItsJobIsUnused(t *testing.T) {
	var p *fakeProc
	started := make(chan struct{})
	spec := Spec{Job: func(ctx context.Context) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}}
	go func() { <-started; p.exit <- 3 }()
	p = &fakeProc{exit: make(chan int, 1)}
	st := Streams{In: io.Discard, CloseIn: func() {}, Out: eofReader{}, Close: func() {}}
	_, err := Supervise(context.Background(), spec, p, st, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, ErrUnused)
	assert.ErrorIs(t, err, errEnded)
	assert.Zero(t, p.kills.Load())
}

func TestSuperviseWallClockKillsOnce(t *testing.T) {
	p, res, err := superviseFake(t, Spec{Stdin: []byte("job"), Limits: Limits{Timeout: 50 * time.Millisecond}})
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.Equal(t, 137, res.ExitCode)
	assert.Equal(t, int32(1), p.kills.Load())
	assert.False(t, p.lateKill.Load())
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
