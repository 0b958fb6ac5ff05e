package mounts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json"
)

// fileFormat is the allowlist file, DESIGN.md "Mount allowlist".
type fileFormat struct {
	AllowedRoots []struct {
		Path           string `json:"path"`
		AllowReadWrite bool   `json:"allowReadWrite"`
		Description    string `json:"description"`
	} `json:"allowedRoots"`
	BlockedPatterns []string `json:"blockedPatterns"`
	NonMainReadOnly *bool    `json:"nonMainReadOnly"` // absent: true
}

// maxFileSize bounds what Load reads; an allowlist is a few hundred bytes.
const maxFileSize = 1 << 20

// Load reads and validates the allowlist file at path; home expands "~" in
// it and in later requests. A missing file gives an empty allowlist and
// ErrNoAllowlist (no extra mounts). Any other problem — bad JSON, unknown
// fields, wrong types, an empty or relative root, a root that does not exist
// or is not a directory, an empty pattern — is an error naming the file, and
// the caller grants no extra mounts. Roots are resolved here. The file
// itself, home and home/.config are protected from mounting.
func Load(path string, home string) (Allowlist, error) {
	empty := Allowlist{Home: home, NonMainReadOnly: true}
	empty.protectDefaults(path)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, ErrNoAllowlist
	}
	if err != nil {
		return empty, fmt.Errorf("mount allowlist %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return empty, fmt.Errorf("mount allowlist %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return empty, fmt.Errorf("mount allowlist %s: larger than %d bytes", path, maxFileSize)
	}
	al, err := parse(data, home)
	if err != nil {
		return empty, fmt.Errorf("mount allowlist %s: %w", path, err)
	}
	al.protectDefaults(path)
	return al, nil
}

// protectDefaults protects the allowlist file, the home directory and
// ~/.config (DESIGN: never visible in a sandbox).
func (a *Allowlist) protectDefaults(allowlistPath string) {
	if abs, err := filepath.Abs(allowlistPath); err == nil {
		a.Protected = append(a.Protected, Protected{Path: abs, What: "the mount allowlist", Mode: ProtectAll})
	}
	if a.Home != "" && isAbs(a.Home) {
		a.Protected = append(a.Protected,
			Protected{Path: a.Home, What: "the home directory", Mode: ProtectContaining},
			Protected{Path: filepath.Join(a.Home, ".config"), What: "~/.config", Mode: ProtectAll},
		)
	}
}

// parse validates the file's content; errors do not name the file (Load does).
func parse(data []byte, home string) (Allowlist, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return Allowlist{}, errors.New("empty file")
	}
	if trimmed[0] != '{' {
		return Allowlist{}, errors.New("not a JSON object")
	}
	// Names match exactly, as the file documents them: encoding/json v1
	// would take "allowreadwrite" for "allowReadWrite".
	var ff fileFormat
	if err := json.Unmarshal(trimmed, &ff, json.RejectUnknownMembers(true)); err != nil {
		return Allowlist{}, fmt.Errorf("invalid JSON: %w", err)
	}

	al := Allowlist{Home: home, NonMainReadOnly: true}
	if ff.NonMainReadOnly != nil {
		al.NonMainReadOnly = *ff.NonMainReadOnly
	}
	for i, p := range ff.BlockedPatterns {
		switch {
		case strings.TrimSpace(p) == "" || fold(p) == "":
			return Allowlist{}, fmt.Errorf("blockedPatterns[%d]: empty pattern", i)
		case strings.ContainsRune(p, 0):
			return Allowlist{}, fmt.Errorf("blockedPatterns[%d] %q: contains NUL", i, p)
		case !validPatternParts(p):
			return Allowlist{}, fmt.Errorf("blockedPatterns[%d] %q: each '/'-separated part must be a name (not empty, \".\", \"..\" or a bare \"*\")", i, p)
		}
		al.Blocked = append(al.Blocked, p)
	}
	ps := al.patterns()
	for i, r := range ff.AllowedRoots {
		root, err := resolveRoot(r.Path, home, ps)
		if err != nil {
			return Allowlist{}, fmt.Errorf("allowedRoots[%d] %q: %w", i, r.Path, err)
		}
		al.Roots = append(al.Roots, Root{
			Path:           r.Path,
			Resolved:       root,
			AllowReadWrite: r.AllowReadWrite,
			Description:    r.Description,
		})
	}
	return al, nil
}

// validPatternParts: every '/'-separated part of a pattern is a name, and an
// extension pattern ("*.key") has something after its '*'.
func validPatternParts(p string) bool {
	for _, part := range strings.Split(p, "/") {
		f := fold(part)
		if f == "" || f == "." || f == ".." || f == "*" || strings.TrimSpace(part) == "" {
			return false
		}
	}
	return true
}

func resolveRoot(p, home string, ps []pattern) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	expanded, err := expandHome(p, home)
	if err != nil {
		return "", err
	}
	if !isAbs(expanded) {
		return "", errors.New("not an absolute path")
	}
	if c, pat, hit := blockedComponent(expanded, ps); hit {
		return "", fmt.Errorf("path component %q matches blocked pattern %q", c, pat)
	}
	resolved, err := filepath.EvalSymlinks(expanded)
	if err != nil {
		return "", fmt.Errorf("cannot resolve: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("cannot stat: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", resolved)
	}
	if c, pat, hit := blockedComponent(resolved, ps); hit {
		return "", fmt.Errorf("resolves to %s whose component %q matches blocked pattern %q", resolved, c, pat)
	}
	return resolved, nil
}

// expandHome expands a leading "~" or "~/" with home. "~user" is refused:
// other users' homes are not ours to guess.
func expandHome(p, home string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", errors.New("~user paths are not supported; write the path out")
		}
		return p, nil
	}
	if home == "" || !isAbs(home) {
		return "", fmt.Errorf("cannot expand ~: home directory %q is not absolute", home)
	}
	return home + p[1:], nil
}

func isAbs(p string) bool { return strings.HasPrefix(p, "/") }
