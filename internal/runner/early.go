package runner

import (
	"bytes"
	"context"
	"sync"
)

// earlyResult watches the agent's output as it streams and hands the answer
// to Request.OnResult the moment the verdict has one (its first result, every
// line before it well formed). The handler runs on its own goroutine so the
// output copy never blocks on it.
type earlyResult struct {
	ctx      context.Context
	onResult func(context.Context, string) error

	mu      sync.Mutex
	partial []byte
	verdict verdict
	fired   bool
	done    chan struct{} // closed once the handler returned
	text    string
	err     error
}

func newEarlyResult(ctx context.Context, onResult func(context.Context, string) error) *earlyResult {
	if onResult == nil {
		return nil
	}
	return &earlyResult{ctx: ctx, onResult: onResult, done: make(chan struct{})}
}

func (e *earlyResult) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fired || e.verdict.err != nil {
		return len(p), nil
	}
	e.partial = append(e.partial, p...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := e.partial[:i]
		e.partial = e.partial[i+1:]
		if e.verdict.line(line) {
			e.fired, e.partial, e.text = true, nil, *e.verdict.result
			go func() {
				defer close(e.done)
				e.err = e.onResult(e.ctx, e.text)
			}()
			return len(p), nil
		}
		if e.verdict.err != nil {
			e.partial = nil
			return len(p), nil
		}
	}
}

// wait returns, once the sandbox has ended, whether the handler ran and what
// it returned.
func (e *earlyResult) wait() (text string, handled bool, err error) {
	e.mu.Lock()
	fired := e.fired
	e.mu.Unlock()
	if !fired {
		return "", false, nil
	}
	<-e.done
	return e.text, true, e.err
}
