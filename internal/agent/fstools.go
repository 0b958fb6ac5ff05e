package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	defaultReadLines = 2000
	maxListEntries   = 1000
	maxEditBytes     = 16 << 20
)

// resolve makes p absolute. The sandbox is the boundary, so absolute paths
// anywhere are fine; relative ones are relative to the group folder.
func (a *runner) resolve(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(a.opts.WorkspaceDir, p)
	}
	return filepath.Clean(p), nil
}

func (a *runner) readFile(_ context.Context, args readFileArgs) (string, error) {
	path, err := a.resolve(args.Path)
	if err != nil {
		return "", fmt.Errorf("read_file: %w", err)
	}
	if args.Offset < 0 || args.Limit < 0 {
		return "", errors.New("read_file: offset and limit must not be negative")
	}
	first := max(args.Offset, 1)
	limit := args.Limit
	if limit == 0 {
		limit = defaultReadLines
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read_file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return "", fmt.Errorf("read_file: %s is a directory; use list_files", path)
	}

	br := bufio.NewReader(f)
	var out strings.Builder
	line, shown := 0, 0
	budget := MaxToolResult - 256 // room for the note
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			line++
			if line >= first {
				if shown == limit || out.Len()+len(s) > budget {
					if shown == 0 { // one huge line: show its start
						out.WriteString(capText(s, budget))
						shown = 1
					}
					fmt.Fprintf(&out, "\n[... more follows; continue with offset=%d]", first+shown)
					return out.String(), nil
				}
				out.WriteString(s)
				shown++
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read_file: %w", err)
		}
	}
	switch {
	case line == 0:
		return "(empty file)", nil
	case shown == 0:
		return fmt.Sprintf("(offset %d is past the end of the file: it has %d lines)", first, line), nil
	}
	return out.String(), nil
}

func (a *runner) writeFile(_ context.Context, args writeFileArgs) (string, error) {
	path, err := a.resolve(args.Path)
	if err != nil {
		return "", fmt.Errorf("write_file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("write_file: %w", err)
	}
	if err := os.WriteFile(path, []byte(args.Content), 0o644); err != nil {
		return "", fmt.Errorf("write_file: %w", err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(args.Content), path), nil
}

func (a *runner) editFile(_ context.Context, args editFileArgs) (string, error) {
	path, err := a.resolve(args.Path)
	if err != nil {
		return "", fmt.Errorf("edit_file: %w", err)
	}
	if args.OldText == "" {
		return "", errors.New("edit_file: old_text is empty")
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("edit_file: %w", err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("edit_file: %s is a directory", path)
	}
	if st.Size() > maxEditBytes {
		return "", fmt.Errorf("edit_file: %s is larger than %d bytes; use bash", path, maxEditBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("edit_file: %w", err)
	}
	content := string(data)
	switch n := strings.Count(content, args.OldText); n {
	case 1:
	case 0:
		return "", fmt.Errorf("edit_file: old_text not found in %s", path)
	default:
		return "", fmt.Errorf("edit_file: old_text occurs %d times in %s; it must occur exactly once (include more context)", n, path)
	}
	content = strings.Replace(content, args.OldText, args.NewText, 1)
	if err := os.WriteFile(path, []byte(content), st.Mode().Perm()); err != nil {
		return "", fmt.Errorf("edit_file: %w", err)
	}
	return "edited " + path, nil
}

func (a *runner) listFiles(_ context.Context, args listFilesArgs) (string, error) {
	root := a.opts.WorkspaceDir
	if args.Path != "" {
		var err error
		if root, err = a.resolve(args.Path); err != nil {
			return "", fmt.Errorf("list_files: %w", err)
		}
	}
	if args.Pattern != "" {
		if _, err := filepath.Match(args.Pattern, ""); err != nil {
			return "", fmt.Errorf("list_files: bad pattern %q: %w", args.Pattern, err)
		}
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("list_files: %w", err)
	}
	if !st.IsDir() {
		return root, nil
	}

	var lines []string
	var problems int
	full := false
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			problems++
			if d != nil && d.IsDir() && p != root {
				return fs.SkipDir
			}
			return nil
		}
		if p == root {
			return nil
		}
		if len(lines) >= maxListEntries {
			full = true
			return fs.SkipAll
		}
		if args.Pattern != "" {
			if ok, _ := filepath.Match(args.Pattern, d.Name()); !ok {
				return nil
			}
		}
		rel, _ := filepath.Rel(root, p) // p is under root by construction
		if d.IsDir() {
			rel += "/"
		}
		lines = append(lines, rel)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("list_files: %w", err)
	}
	var out strings.Builder
	if len(lines) == 0 {
		out.WriteString("(no matching files)")
	} else {
		out.WriteString(strings.Join(lines, "\n"))
	}
	if full {
		fmt.Fprintf(&out, "\n[listing stopped at %d entries; narrow path or pattern]", maxListEntries)
	}
	if problems > 0 {
		fmt.Fprintf(&out, "\n[%d entries could not be read]", problems)
	}
	return out.String(), nil
}
