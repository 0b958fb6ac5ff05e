package sandbox

import (
	"io"
	"sync"
)

// CapWriter passes at most Limit bytes to W, then drops the rest and calls
// OnLimit once. It never fails, so the sandbox's stream keeps draining until
// the process is dead. A nil W discards; a nil OnLimit is not called.
type CapWriter struct {
	W     io.Writer
	Limit int64
	// OnLimit runs in a goroutine of its own: it typically kills the sandbox,
	// which may be slow (an engine call) and must not stall the stream.
	OnLimit func()

	mu     sync.Mutex
	n      int64
	over   bool
	failed bool // W returned an error; stop forwarding
}

// Write forwards what fits under the limit and reports all of p as written.
func (c *CapWriter) Write(p []byte) (int, error) {
	total := len(p)
	first := false
	c.mu.Lock()
	room := c.Limit - c.n
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		if !c.over {
			c.over = true
			first = true
		}
	}
	if len(p) > 0 && !c.failed && c.W != nil {
		if _, err := c.W.Write(p); err != nil {
			c.failed = true
		}
	}
	c.n += int64(len(p))
	c.mu.Unlock()
	// over is set once under the lock, so this runs at most once.
	if first && c.OnLimit != nil {
		go c.OnLimit()
	}
	return total, nil
}

// Truncated reports whether anything was dropped.
func (c *CapWriter) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

// Tail keeps the last Max bytes written to it (nothing when Max <= 0).
type Tail struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	keep := max(t.Max, 0)
	if len(p) >= keep {
		t.buf = append(t.buf[:0], p[len(p)-keep:]...)
		return n, nil
	}
	if drop := len(t.buf) + len(p) - keep; drop > 0 {
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the bytes kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
