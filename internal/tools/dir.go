package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		return Set{Problems: []Problem{{File: d.path, Reason: err.Error()}}}
	}
	if sig == d.sig && d.sig != "" {
		return d.set
	}
	d.set, d.sig = read(files), sig
	return d.set
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
		data, err := os.ReadFile(f)
		if err == nil && !isRegular(f) {
			err = errors.New("not a regular file")
		}
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

func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
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
