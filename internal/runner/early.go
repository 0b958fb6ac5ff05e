package runner

import (
	"bytes"
	"context"
	"sync"

	"github.com/clawpen/clawpen/internal/job"
)

// earlyResult watches the agent's output as it streams and hands the result
// to Request.OnResult the moment its line is complete, provided every line
// before it was a well-formed, non-error event (the rules of parseOutput).
// The handler runs on its own goroutine so the output copy never blocks on it.
type earlyResult struct {
	ctx      context.Context
	onResult func(context.Context, string) error

	mu      sync.Mutex
	partial []byte
	spoiled bool // a garbage or error line came first: no early answer
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
	if e.spoiled || e.fired {
		return len(p), nil
	}
	e.partial = append(e.partial, p...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimSpace(e.partial[:i])
		e.partial = e.partial[i+1:]
		if len(line) == 0 {
			continue
		}
		ev, err := job.ParseEvent(line)
		switch {
		case err != nil || ev.Type == job.EventError:
			e.spoiled, e.partial = true, nil
			return len(p), nil
		case ev.Type == job.EventResult:
			e.fired, e.partial, e.text = true, nil, ev.Text
			go func() {
				defer close(e.done)
				e.err = e.onResult(e.ctx, e.text)
			}()
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
