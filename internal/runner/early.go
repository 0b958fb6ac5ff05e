package runner

import (
	"bytes"
	"sync"

	"github.com/clawpen/clawpen/internal/domain"
)

// Invocation is one agent run in progress (Runner.Start). Its answer
// arrives on Answer before the sandbox has ended; Wait says how the run
// ended, once the sandbox is gone.
type Invocation struct {
	answer chan string // the answer, once; closed when the run is over
	done   chan struct{}

	mu    sync.Mutex
	gave  bool // the answer was handed over
	ended bool // Finish was called
	ans   Answer
	err   error
}

// NewInvocation is a run in progress, for whatever runs agents: the runner,
// or a stand-in in tests.
func NewInvocation() *Invocation {
	return &Invocation{answer: make(chan string, 1), done: make(chan struct{})}
}

// Answer receives the agent's answer as soon as it is known (its first
// result line, every line before it well formed). It is closed without a
// value when the run ends without one.
func (v *Invocation) Answer() <-chan string { return v.answer }

// Wait waits for the run's end and says how it ended. A run that gave its
// answer succeeded, whatever its sandbox did after that (logged).
func (v *Invocation) Wait() (Answer, error) {
	<-v.done
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ans, v.err
}

// answered hands over the answer; only the first counts.
func (v *Invocation) answered(text string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.answerLocked(text)
}

func (v *Invocation) answerLocked(text string) {
	if !v.gave && !v.ended {
		v.gave = true
		v.answer <- text // buffered: never blocks
	}
}

// Finish ends the run with its outcome: a run that succeeded has handed
// over its answer (a.Text, if not before).
func (v *Invocation) Finish(a Answer, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		v.answerLocked(a.Text)
	}
	v.ended, v.ans, v.err = true, a, err
	close(v.answer)
	close(v.done)
}

// earlyResult watches the agent's output as it streams and hands the answer
// to its invocation the moment the verdict has one (its first result, every
// line before it well formed).
type earlyResult struct {
	inv      *Invocation       // nil until attached: lines wait
	progress func(text string) // nil: progress lines are not wanted

	mu      sync.Mutex
	partial []byte
	verdict verdict
	fired   bool
	text    string
}

func (e *earlyResult) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fired || e.verdict.err != nil {
		return len(p), nil
	}
	e.partial = append(e.partial, p...)
	e.feedLocked()
	return len(p), nil
}

// attach names the invocation the output is for (a sandbox started before
// its job is known): what was written before is read now.
func (e *earlyResult) attach(inv *Invocation, progress func(string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inv, e.progress = inv, progress
	e.feedLocked()
}

// feedLocked reads the whole lines written so far, once attached.
func (e *earlyResult) feedLocked() {
	if e.inv == nil {
		return
	}
	for !e.fired && e.verdict.err == nil {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			return
		}
		line := e.partial[:i]
		e.partial = e.partial[i+1:]
		e.showProgress(line)
		if e.verdict.line(line) {
			e.fired, e.partial, e.text = true, nil, *e.verdict.result
			e.inv.answered(e.text)
			return
		}
		if e.verdict.err != nil {
			e.partial = nil
			return
		}
	}
}

// answer is, once the sandbox has ended, the answer handed over early, if
// there was one.
func (e *earlyResult) answer() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.text, e.fired
}

// showProgress hands the text of a progress line on. Only lines before the
// result and before any malformed line get here (Write stops at either).
func (e *earlyResult) showProgress(line []byte) {
	if e.progress == nil {
		return
	}
	if ev, err := domain.ParseEvent(bytes.TrimSpace(line)); err == nil && ev.Type == domain.EventProgress {
		e.progress(ev.Text)
	}
}
