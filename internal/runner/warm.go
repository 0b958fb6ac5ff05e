package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/clawpen/clawpen/internal/domain"
)

// Warm sandboxes (DESIGN.md, "Sandbox contract": a sandbox may be started
// ahead of its job, with the group's view at that moment). After a group's
// run, and for main at start, the pool starts the group's next sandbox at
// once: the agent is up and waits for its job on stdin, having read nothing
// and run nothing. A message then only hands the job over.

// WarmConfig sizes the warm pool.
type WarmConfig struct {
	// Size is how many warm sandboxes are kept: main's, then the most
	// recently active groups'. 0 turns the pool off.
	Size int
	// Idle is how long one may wait for its job before it is dropped.
	Idle time.Duration
	// Group looks up a group's registration as it is now; a warm sandbox
	// of a group unregistered or changed since is dropped.
	Group func(ctx context.Context, folder string) (domain.Group, bool, error)
	// MinAvailable is the memory (MemAvailable) below which no warm sandbox
	// is made and those waiting are dropped; 0: a tenth of the host's.
	MinAvailable int64
	// Sweep is how often the pool checks views, registrations and memory.
	Sweep time.Duration
}

// Discard reasons, for the log.
var (
	errWarmIdle    = errors.New("idle too long")
	errWarmView    = errors.New("its view changed")
	errWarmMemory  = errors.New("memory is short")
	errWarmEvicted = errors.New("its group is no longer among the most recently active")
	errWarmStopped = errors.New("the pool stopped")
)

type warmPool struct {
	r   *Runner
	cfg WarmConfig

	// alive counts the warm sandboxes not yet gone, for StopWarm.
	alive sync.WaitGroup

	mu     sync.Mutex
	ctx    context.Context // the host's: set by StartWarm; nil: nothing is made
	main   *domain.Group
	recent []string // folders of the most recently active other groups, newest first
	ready  map[string]*warmEntry
}

type warmEntry struct {
	sr   *sandboxRun
	idle *time.Timer
}

func newWarmPool(r *Runner, cfg WarmConfig) *warmPool {
	if cfg.Size <= 0 {
		return nil
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 10 * time.Minute
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = 30 * time.Second
	}
	return &warmPool{r: r, cfg: cfg, ready: map[string]*warmEntry{}}
}

// StartWarm starts the warm pool under ctx (the host's life): main's
// sandbox at once, the others as their groups run. When ctx is done every
// warm sandbox is stopped. Without a pool (CLAWPEN_WARM=0) it does nothing.
func (r *Runner) StartWarm(ctx context.Context) {
	p := r.warm
	if p == nil {
		return
	}
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	go p.sweepLoop(ctx)
	if p.cfg.Group == nil {
		return
	}
	main, ok, err := p.cfg.Group(ctx, domain.MainFolder)
	if err != nil || !ok {
		return // main's sandbox is made after its first run
	}
	p.mu.Lock()
	p.main = &main
	p.mu.Unlock()
	p.fill(main)
}

// StopWarm waits, once the context given to StartWarm is done, until every
// warm sandbox is gone: a container must not outlive the host that made it.
func (r *Runner) StopWarm() {
	if r.warm != nil {
		r.warm.alive.Wait()
	}
}

// Warm lists the groups with a sandbox waiting, and how many may wait.
func (r *Runner) Warm() (folders []string, max int) {
	p := r.warm
	if p == nil {
		return nil, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.ready {
		folders = append(folders, f)
	}
	slices.Sort(folders)
	return folders, p.cfg.Size
}

// take hands over the group's warm sandbox when it was made in the view
// key. A sandbox made in another view is dropped: it must not serve.
func (p *warmPool) take(folder, key string) *sandboxRun {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	e, ok := p.ready[folder]
	if ok {
		delete(p.ready, folder)
		e.idle.Stop()
	}
	p.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-e.sr.done:
		p.r.cfg.Logger.Warn("warm sandbox ended before its job", "group", folder, "invocation", e.sr.inv, "err", e.sr.err)
		e.sr.close()
		return nil
	default:
	}
	if e.sr.view.key != key {
		p.stop(folder, e, errWarmView)
		return nil
	}
	return e.sr
}

// ran notes a run of g as just ended: g becomes the most recently active
// group and, when it is among those the pool keeps, gets its next sandbox.
func (p *warmPool) ran(g domain.Group) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if g.IsMain() {
		p.main = &g
	} else {
		p.recent = slices.DeleteFunc(p.recent, func(f string) bool { return f == g.Folder })
		p.recent = slices.Insert(p.recent, 0, g.Folder)
	}
	p.mu.Unlock()
	p.fill(g)
}

// wantedLocked is the set of folders the pool keeps warm: main's first,
// then the most recently active.
func (p *warmPool) wantedLocked() map[string]bool {
	want := map[string]bool{}
	n := p.cfg.Size
	if p.main != nil && n > 0 {
		want[p.main.Folder] = true
		n--
	}
	for _, f := range p.recent {
		if n == 0 {
			break
		}
		if !want[f] {
			want[f] = true
			n--
		}
	}
	if len(p.recent) > 4*p.cfg.Size {
		p.recent = p.recent[:4*p.cfg.Size]
	}
	return want
}

// fill drops the sandboxes of groups the pool no longer keeps and makes
// g's when the pool keeps it and memory allows.
func (p *warmPool) fill(g domain.Group) {
	p.mu.Lock()
	ctx := p.ctx
	if ctx == nil || ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	want := p.wantedLocked()
	var evicted []string
	for f := range p.ready {
		if !want[f] {
			evicted = append(evicted, f)
		}
	}
	_, have := p.ready[g.Folder]
	p.mu.Unlock()
	for _, f := range evicted {
		p.drop(f, nil, errWarmEvicted)
	}
	if !want[g.Folder] || have {
		return
	}
	if short, avail := p.memoryShort(); short {
		p.r.cfg.Logger.Info("no warm sandbox: memory is short", "group", g.Folder, "available_mb", avail>>20)
		return
	}
	p.alive.Add(1)
	sr, err := p.make(ctx, g)
	if err == nil {
		go func() { <-sr.done; p.alive.Done() }()
	} else {
		p.alive.Done()
	}
	if err != nil {
		// The run will say why, when it comes; a warm sandbox is only a head start.
		p.r.cfg.Logger.Debug("no warm sandbox", "group", g.Folder, "err", err)
		return
	}
	e := &warmEntry{sr: sr}
	p.mu.Lock()
	if _, dup := p.ready[g.Folder]; dup || p.ctx.Err() != nil {
		p.mu.Unlock()
		p.stop(g.Folder, e, errWarmStopped)
		return
	}
	e.idle = time.AfterFunc(p.cfg.Idle, func() { p.drop(g.Folder, e, errWarmIdle) })
	p.ready[g.Folder] = e
	p.mu.Unlock()
	// One that ends by itself (it should not) leaves the pool.
	go func() {
		<-sr.done
		p.mu.Lock()
		mine := p.ready[g.Folder] == e
		if mine {
			delete(p.ready, g.Folder)
		}
		p.mu.Unlock()
		if mine {
			p.r.cfg.Logger.Warn("warm sandbox ended before its job", "group", g.Folder, "invocation", sr.inv, "err", sr.err)
			sr.close()
		}
	}()
	p.r.cfg.Logger.Debug("warm sandbox started", "group", g.Folder, "invocation", sr.inv)
	go func() {
		select {
		case <-sr.ready:
			p.r.cfg.Logger.Debug("warm sandbox ready", "group", g.Folder, "invocation", sr.inv)
		case <-sr.done:
		}
	}()
}

// make starts g's sandbox in its view now, waiting for a job.
func (p *warmPool) make(ctx context.Context, g domain.Group) (*sandboxRun, error) {
	r := p.r
	if err := r.ensureDirs(ctx, g); err != nil {
		return nil, err
	}
	v, err := r.viewOf(ctx, g, false)
	if err != nil {
		return nil, err
	}
	return r.launch(ctx, v, nil, nil)
}

// drop drops the group's waiting sandbox; when e is given, only if the
// waiting one is still e.
func (p *warmPool) drop(folder string, e *warmEntry, why error) {
	p.mu.Lock()
	cur, ok := p.ready[folder]
	ok = ok && (e == nil || cur == e)
	if ok {
		delete(p.ready, folder)
	}
	p.mu.Unlock()
	if ok {
		p.stop(folder, cur, why)
	}
}

// stop ends e, already out of the pool, and releases its socket once its
// sandbox is gone.
func (p *warmPool) stop(folder string, e *warmEntry, why error) {
	if e.idle != nil {
		e.idle.Stop()
	}
	p.r.cfg.Logger.Info("warm sandbox dropped", "group", folder, "invocation", e.sr.inv, "reason", why.Error())
	e.sr.stop(fmt.Errorf("warm sandbox dropped: %w", why))
	go func() {
		<-e.sr.done
		e.sr.close()
	}()
}

// sweepLoop drops, every Sweep, the warm sandboxes whose view or group
// changed, and all of them while memory is short; when ctx ends, all.
func (p *warmPool) sweepLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			folders := make([]string, 0, len(p.ready))
			for f := range p.ready {
				folders = append(folders, f)
			}
			p.mu.Unlock()
			for _, f := range folders {
				p.drop(f, nil, errWarmStopped)
			}
			return
		case <-t.C:
			p.sweep(ctx)
		}
	}
}

// sweep checks every waiting sandbox against its group's view now.
func (p *warmPool) sweep(ctx context.Context) {
	p.mu.Lock()
	entries := make(map[string]*warmEntry, len(p.ready))
	for f, e := range p.ready {
		entries[f] = e
	}
	p.mu.Unlock()
	short, _ := p.memoryShort()
	for f, e := range entries {
		if short {
			p.drop(f, e, errWarmMemory)
			continue
		}
		if !p.current(ctx, e) {
			p.drop(f, e, errWarmView)
		}
	}
}

// current reports whether e's sandbox still has its group's view.
func (p *warmPool) current(ctx context.Context, e *warmEntry) bool {
	g := e.sr.view.group
	if p.cfg.Group != nil {
		now, ok, err := p.cfg.Group(ctx, g.Folder)
		if err != nil || !ok {
			return false
		}
		g = now
	}
	v, err := p.r.viewOf(ctx, g, false)
	return err == nil && v.key == e.sr.view.key
}

// memoryShort reports whether the host's available memory is below the
// pool's floor, and how much is available.
func (p *warmPool) memoryShort() (bool, int64) {
	avail, total, err := meminfo()
	if err != nil {
		return false, 0 // unknown: the sandboxes' own cgroups still bound them
	}
	floor := p.cfg.MinAvailable
	if floor <= 0 {
		floor = total / 10
	}
	return avail < floor, avail
}

// meminfo reads MemAvailable and MemTotal, in bytes.
func meminfo() (avail, total int64, err error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, err
	}
	m, err := fs.Meminfo()
	if err != nil {
		return 0, 0, err
	}
	if m.MemAvailableBytes == nil || m.MemTotalBytes == nil {
		return 0, 0, errors.New("/proc/meminfo: no MemAvailable or MemTotal")
	}
	return int64(*m.MemAvailableBytes), int64(*m.MemTotalBytes), nil
}
