package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Problem is a definition that was skipped, and why.
type Problem struct {
	File   string
	Reason string
}

func (p Problem) String() string { return p.File + ": " + p.Reason }

// Set is the definitions of a tools dir as they read at one moment.
type Set struct {
	Tools    []*Tool // by name
	Problems []Problem
}

// Lookup finds a tool by name.
func (s Set) Lookup(name string) *Tool {
	i := slices.IndexFunc(s.Tools, func(t *Tool) bool { return t.Name == name })
	if i < 0 {
		return nil
	}
	return s.Tools[i]
}

// Dir is a tools directory, read again whenever one of its *.md files
// changes (its name, size or modification time): an edit takes effect at
// the next call, without a restart. It also keeps each tool's last error
// for the owner's view. Safe for concurrent use.
type Dir struct {
	path string

	mu      sync.Mutex
	sig     string // of the files the cached set was read from
	set     Set
	lastErr map[string]LastError
}

// LastError is the last failed call of a tool.
type LastError struct {
	Time time.Time
	Err  string
}

// NewDir is the tools dir at path ("" or missing: no tools). A relative
// path is made absolute now, so that the programs it names are found
// wherever the host runs them from.
func NewDir(path string) *Dir {
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	return &Dir{path: path, lastErr: map[string]LastError{}}
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Load returns the definitions as they are now. A missing directory has
// none; a broken file is a Problem and the others load.
func (d *Dir) Load() Set {
	files, sig, err := d.scan()
	if err != nil {
		return Set{Problems: []Problem{{File: d.path, Reason: err.Error()}}}
	}
	d.mu.Lock()
	if sig == d.sig && d.sig != "" {
		defer d.mu.Unlock()
		return d.set
	}
	d.mu.Unlock()
	// Read without the lock: a slow disk holds up no other call, nor the
	// owner's view of the last errors.
	s := read(files)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set, d.sig = s, sig
	return s
}

// scan lists the directory's *.md files with a signature of their state.
func (d *Dir) scan() ([]string, string, error) {
	if d.path == "" {
		return nil, "none", nil
	}
	entries, err := os.ReadDir(d.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "missing", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read tools directory: %w", err)
	}
	var files []string
	var sig strings.Builder
	sig.WriteString("dir:")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		p := filepath.Join(d.path, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&sig, "%s?;", e.Name())
		} else {
			fmt.Fprintf(&sig, "%s %d %d %d;", e.Name(), fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		}
		files = append(files, p)
	}
	return files, sig.String(), nil
}

// read parses files (sorted by name); a name defined twice keeps the
// first file's definition.
func read(files []string) Set {
	var s Set
	for _, f := range files {
		data, err := readDefinition(f)
		if err != nil {
			s.Problems = append(s.Problems, Problem{File: f, Reason: err.Error()})
			continue
		}
		t, err := Parse(f, data)
		if err != nil {
			s.Problems = append(s.Problems, Problem{File: f, Reason: err.Error()})
			continue
		}
		if prev := s.Lookup(t.Name); prev != nil {
			s.Problems = append(s.Problems, Problem{File: f, Reason: fmt.Sprintf("name %q is already defined in %s", t.Name, prev.File)})
			continue
		}
		s.Tools = append(s.Tools, t)
	}
	slices.SortFunc(s.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// readDefinition reads a tool file, which must be a regular file (a
// symlink to one is followed), and at most one byte more than a definition
// may hold. Anything else (a FIFO no one writes, /dev/zero) is refused
// before it is opened, since opening a device may itself act; what was
// opened is checked again, non-blocking, in case the name changed between.
func readDefinition(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(p, fi.Mode())
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(p, fi.Mode())
	}
	return io.ReadAll(io.LimitReader(f, maxFileBytes+1)) // Parse refuses what is past the bound
}

// notRegular names what p is instead of a regular file.
func notRegular(p string, m fs.FileMode) error {
	what := "a special file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	}
	if li, err := os.Lstat(p); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		what = "a symlink to " + what
	}
	return errors.New("not a regular file: " + what)
}

// Record keeps the outcome of a call of name: err "" clears nothing, a
// failure replaces the last one.
func (d *Dir) Record(name string, at time.Time, failure string) {
	if failure == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastErr[name] = LastError{Time: at, Err: failure}
}

// LastError is the last failure of name's calls since the host started.
func (d *Dir) LastError(name string) (LastError, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.lastErr[name]
	return e, ok
}
