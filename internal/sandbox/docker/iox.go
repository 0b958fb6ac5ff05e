package docker

import (
	"io"
	"sync"
)

// capWriter passes at most limit bytes to w, then drops the rest and calls
// onLimit once. It never fails, so the stream keeps draining until the
// container is dead.
type capWriter struct {
	w       io.Writer
	limit   int64
	onLimit func()

	mu      sync.Mutex
	n       int64
	over    bool
	failed  bool // w returned an error; stop forwarding
	limitFn sync.Once
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := len(p)
	room := c.limit - c.n
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		if !c.over {
			c.over = true
			// After the unlock: onLimit calls the engine.
			defer func() { go c.limitFn.Do(c.onLimit) }()
		}
	}
	if len(p) > 0 && !c.failed {
		if _, err := c.w.Write(p); err != nil {
			c.failed = true
		}
	}
	c.n += int64(len(p))
	return total, nil
}

func (c *capWriter) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if drop := len(t.buf) + len(p) - t.max; drop > 0 {
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
