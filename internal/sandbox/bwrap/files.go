package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// prepared is one invocation's command line and the files it refers to.
type prepared struct {
	args  []string
	files []*os.File      // ExtraFiles: files[i] is fd 3+i in bwrap
	gate  *gate           // the host's hold on the sandbox until its limits are set
	pins  *sandbox.PinSet // staging binds of the sources, when pinning
}

// close releases every descriptor the host still holds.
func (p *prepared) close() {
	for _, f := range p.files {
		if f != nil {
			_ = f.Close()
		}
	}
	p.gate.close()
	p.pins.Release()
}

// gate is how the host holds a sandbox until its limits are set: bwrap
// reports its namespace init on info (--info-fd), and the init waits on
// block (--block-fd) until the host writes a byte there (release). The init
// holds a write end of block itself (--sync-fd, which bwrap keeps open in
// the init alone and closes in the command before exec): it never reads
// EOF there, so a host that dies or gives up before the release leaves it
// waiting, having run nothing, until it dies with bwrap.
type gate struct {
	info, block          *os.File // the host's ends
	infoW, blockR, syncW *os.File // bwrap's, until it has started
}

func newGate() (*gate, error) {
	g := &gate{}
	var err error
	if g.info, g.infoW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("info pipe: %w", err)
	}
	if g.blockR, g.block, err = os.Pipe(); err != nil {
		g.close()
		return nil, fmt.Errorf("block pipe: %w", err)
	}
	fd, err := unix.FcntlInt(g.block.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("block pipe: %w", err)
	}
	g.syncW = os.NewFile(uintptr(fd), "sync")
	return g, nil
}

// started drops bwrap's ends once bwrap holds its copies, so that the
// info pipe ends with bwrap.
func (g *gate) started() {
	for _, f := range []*os.File{g.infoW, g.blockR, g.syncW} {
		if f != nil {
			_ = f.Close()
		}
	}
	g.infoW, g.blockR, g.syncW = nil, nil, nil
}

func (g *gate) close() {
	if g == nil {
		return
	}
	g.started()
	for _, f := range []*os.File{g.info, g.block} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// prepare checks that the run-as user can reach every bind source, opens them in
// the order Args numbers them, and builds the command line.
func (b *Backend) prepare(spec sandbox.Spec, command []string) (*prepared, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	layout := b.layoutFor(spec)
	p := &prepared{}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()

	var err error
	for _, f := range sandbox.EtcFiles {
		r, err := dataPipe([]byte(f.Content))
		if err != nil {
			return nil, fmt.Errorf("synthesise %s: %w", f.Dest, err)
		}
		p.files = append(p.files, r)
	}
	if p.gate, err = newGate(); err != nil {
		return nil, err
	}
	p.files = append(p.files, p.gate.infoW, p.gate.blockR)

	if b.pinning() {
		if p.pins, err = sandbox.NewPinSet(b.cfg.PinDir, spec.InvocationID); err != nil {
			return nil, err
		}
	}
	open := func(what, hostPath string, dir bool) error {
		if p.pins != nil {
			// Reachable for the sandbox user wherever the original lives,
			// and fixed to what the path names now.
			staged, err := b.pinSource(p.pins, spec, what, hostPath)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			hostPath = staged
		}
		f, err := b.openSource(what, hostPath, dir)
		if err != nil {
			return err
		}
		p.files = append(p.files, f)
		return nil
	}
	if err := open("group folder", spec.GroupDir, true); err != nil {
		return nil, err
	}
	if spec.GlobalDir != "" {
		if err := open(globalFolder, spec.GlobalDir, true); err != nil {
			return nil, err
		}
	}
	if spec.SessionDir != "" {
		if err := open("session folder", spec.SessionDir, true); err != nil {
			return nil, err
		}
	}
	if spec.SocketPath != "" {
		if err := open("host socket", spec.SocketPath, false); err != nil {
			return nil, err
		}
	}
	if spec.CABundle != "" {
		if err := open("CA bundle", spec.CABundle, false); err != nil {
			return nil, err
		}
	}
	if b.cfg.AgentBin != "" {
		if err := open("agent binary", b.cfg.AgentBin, false); err != nil {
			return nil, err
		}
	}
	for _, m := range spec.Extra {
		if err := open("extra mount "+m.Name, m.HostPath, isDir(m.HostPath)); err != nil {
			return nil, err
		}
		for _, w := range m.Writable {
			if err := open("writable path of "+m.Name, w, isDir(w)); err != nil {
				return nil, err
			}
		}
	}
	// A pipe per run: bwrap reads the program to EOF, and two bwraps
	// reading one shared descriptor would share its offset.
	filter, err := dataPipe(b.filter)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter pipe: %w", err)
	}
	p.files = append(p.files, filter, p.gate.syncW)
	if len(p.files) != layout.count {
		return nil, fmt.Errorf("internal error: opened %d files, layout has %d", len(p.files), layout.count)
	}
	if b.afterOpen != nil {
		b.afterOpen()
	}
	p.args = b.args(spec, layout, command)
	ok = true
	return p, nil
}

const globalFolder = "global folder"

// pinSource pins one bind source. groups/global belongs to the sandbox
// user, which every sandbox runs as; main alone writes it, so a non-main
// group sees it read-only and as nobody's, through an idmapped pin: its
// sandbox owns nothing there, even were the read-only bind lost. Where an
// idmapped mount cannot be made (an old kernel, a filesystem without
// support) it falls back to a plain pin, read-only all the same, and says so.
func (b *Backend) pinSource(set *sandbox.PinSet, spec sandbox.Spec, what, hostPath string) (string, error) {
	if what != globalFolder || spec.GlobalWritable {
		return set.Add(hostPath)
	}
	b.nobodyOnce.Do(func() { b.nobodyView, b.nobodyErr = sandbox.NewIDMap(b.uid, b.gid, sandbox.Nobody, sandbox.Nobody) })
	err := b.nobodyErr
	if err == nil {
		staged, perr := set.AddWith(hostPath, sandbox.PinOptions{IDMap: b.nobodyView, ReadOnly: true})
		if perr == nil {
			return staged, nil
		}
		err = perr
	}
	b.log.Warn("groups/global is shown to a non-main group as its own (read-only): no idmapped pin", "err", err)
	return set.Add(hostPath)
}

// dataPipe returns the read end of a pipe already holding content; the content
// must fit the pipe buffer (the synthesised /etc files are tiny, the seccomp
// program at most a page).
func dataPipe(content []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(content); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// openSource opens a bind source with O_PATH, with no symlink in any component
// (hostPath is resolved: a symlink in it now was swapped in since): the sandbox
// gets exactly the inode checked here even if the path is swapped afterwards.
func (b *Backend) openSource(what, hostPath string, dir bool) (*os.File, error) {
	if !filepath.IsAbs(hostPath) {
		return nil, fmt.Errorf("%s %q is not an absolute path", what, hostPath)
	}
	hostPath = filepath.Clean(hostPath)
	if err := b.reachable(what, hostPath); err != nil {
		return nil, err
	}
	flags := unix.O_PATH | unix.O_NOFOLLOW
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := beneath.Open(hostPath, flags, 0)
	if err != nil {
		if dir && errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s %s is not a directory (symlinks are not followed)", what, hostPath)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	f := os.NewFile(uintptr(fd), hostPath)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat %s %s: %w", what, hostPath, err)
	}
	if !dir && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		_ = f.Close()
		return nil, fmt.Errorf("%s %s is a symlink; give the real path", what, hostPath)
	}
	return f, nil
}

// reachable reports whether the run-as user can traverse every directory leading
// to hostPath: bwrap, running as that user, resolves bind sources itself and
// fails on the first directory it cannot search (e.g. /root with mode 0700).
func (b *Backend) reachable(what, hostPath string) error {
	parent, err := filepath.EvalSymlinks(filepath.Dir(hostPath))
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, hostPath, err)
	}
	dirs := []string{"/"}
	cur := "/"
	for _, part := range strings.Split(strings.TrimPrefix(parent, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		dirs = append(dirs, cur)
	}
	for _, d := range dirs {
		ok, err := b.canSearch(d)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, hostPath, err)
		}
		if !ok {
			return fmt.Errorf("sandbox user uid %d cannot reach %s (%s): %s is not searchable for it; "+
				"make each parent directory traversable (chmod o+x %s) or move the data",
				b.uid, hostPath, what, d, d)
		}
	}
	return nil
}

// canSearch reports whether the run-as user may search directory d.
func (b *Backend) canSearch(d string) (bool, error) {
	if !b.switchUser {
		// bwrap runs with our own credentials: ask the kernel.
		err := unix.Access(d, unix.X_OK)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, unix.EACCES) {
			return false, nil
		}
		return false, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(d, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", d, err)
	}
	mode := st.Mode
	switch {
	case int(st.Uid) == b.uid:
		return mode&0o100 != 0, nil
	case int(st.Gid) == b.gid:
		return mode&0o010 != 0, nil
	default:
		return mode&0o001 != 0, nil
	}
}

// markInheritedCloexec sets close-on-exec on every descriptor of this process
// from 3 up. Go creates its own descriptors close-on-exec, but ones inherited from
// whatever started the host (a shell, a supervisor) are not, and bwrap passes
// whatever it gets on to the sandboxed command. ExtraFiles are unaffected: they
// are dup2'ed in the child, which clears the flag on the copies.
func markInheritedCloexec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: walk /proc/self/fd.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; list /proc/self/fd: %w", err, rerr)
	}
	for _, e := range entries {
		fd, convErr := strconv.Atoi(e.Name())
		if convErr != nil || fd < 3 {
			continue
		}
		// The directory's own descriptor is closed by now; EBADF is expected.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && !errors.Is(ferr, unix.EBADF) {
			return fmt.Errorf("set close-on-exec on fd %d: %w", fd, ferr)
		}
	}
	return nil
}

// isDir reports whether p is a directory itself (not through a symlink).
func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}
