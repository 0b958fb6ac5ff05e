package hostsock

import (
	"context"
	"sync"
)

// Ledger holds, per group, the worst case of every model request in flight
// (its input estimate plus its max_tokens) against the group's daily
// budget, from the request's start until its usage is recorded, so that
// requests at once cannot all pass a nearly spent budget. One Ledger
// serves every socket of a host. It lives in memory: a restart loses the
// reservations (with the requests they were for), never a recorded usage.
type Ledger struct {
	mu     sync.Mutex // guards groups and what they point to
	groups map[string]*inFlight
}

// inFlight is one group's reservations.
type inFlight struct {
	held    int64         // tokens reserved by requests in flight
	settled chan struct{} // closed, and replaced, when one of them settles
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{groups: map[string]*inFlight{}} }

func (l *Ledger) group(name string) *inFlight {
	g := l.groups[name]
	if g == nil {
		g = &inFlight{settled: make(chan struct{})}
		l.groups[name] = g
	}
	return g
}

// reserve holds n tokens for group once its recorded use (used, read
// afresh each time) plus what its requests in flight hold is under budget,
// waiting for one of them to settle while it is not. When the recorded use
// alone has reached the budget it reserves nothing and returns false: a
// refusal. It returns the recorded use it went by.
func (l *Ledger) reserve(ctx context.Context, group string, budget, n int64, used func(context.Context) (int64, error)) (int64, bool, error) {
	for {
		l.mu.Lock()
		g := l.group(group)
		settled := g.settled
		l.mu.Unlock()
		u, err := used(ctx)
		if err != nil {
			return 0, false, err
		}
		if u >= budget {
			return u, false, nil
		}
		l.mu.Lock()
		// A settlement since used was read may have moved tokens from held
		// to the recorded use that u does not show: read it again.
		fresh := g.settled == settled
		if fresh && u+g.held < budget {
			g.held += n
			l.mu.Unlock()
			return u, true, nil
		}
		l.mu.Unlock()
		if !fresh {
			continue
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return 0, false, context.Cause(ctx)
		}
	}
}

// release gives back n tokens of group's, once the usage they were held
// for is recorded.
func (l *Ledger) release(group string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.group(group)
	g.held -= n
	close(g.settled)
	g.settled = make(chan struct{})
}
