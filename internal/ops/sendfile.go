package ops

// send_file: a file from the sandbox's view goes to a chat. The path is the
// agent's, so it is mapped to the host by the host (the group's folder, or
// one of its extra mounts as they are allowed now), whose root the host
// opens; the name below it is opened with openat2 beneath that root,
// through no symlink (package beneath), and with the sandbox user's rights
// (beneath.User): what the open reaches is what the sandbox itself could
// read at that path, never a link's target nor a file only the host may
// read. The bytes are copied into the store at once, so a later change of
// the file (or a swap) cannot change what is sent.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
)

// Limits of send_file.
const (
	MaxSendFile = 50 << 20 // the Bot API's upload limit
	MaxPhoto    = 10 << 20 // larger images go as documents
	MaxCaption  = 1024     // Telegram's caption limit, in characters
	// maxFileCopies bounds the copies in flight at once (each up to
	// MaxSendFile in memory), over all groups.
	maxFileCopies = 2
)

// The sandbox's paths send_file maps (DESIGN.md, "Sandbox view").
const (
	groupView = "/workspace/group"
	extraView = "/workspace/extra"
)

// FileSent is send_file's answer.
type FileSent struct {
	OK     bool   `json:"ok"`
	ChatID int64  `json:"chat_id"`
	SentAs string `json:"sent_as"`
	Bytes  int    `json:"bytes"`
}

// SendFile queues the file at path (as the sandbox sees it) for a chat
// (chatID nil: the caller's own), as a photo or a document.
func (s *Service) SendFile(ctx context.Context, c domain.Caller, sandboxPath, caption string, chatID *int64) (FileSent, error) {
	return call(ctx, s, c, SendFile, func(st *runState) (FileSent, error) {
		if sandboxPath == "" {
			return FileSent{}, bad("path is required")
		}
		if utf8.RuneCountInString(caption) > MaxCaption {
			return FileSent{}, bad("caption is longer than %d characters", MaxCaption)
		}
		target := c.ChatID
		if chatID != nil {
			target = *chatID
		}
		_, registered, err := s.cfg.Store.GroupByChat(ctx, target)
		if err != nil {
			return FileSent{}, err
		}
		if err := authorize(c, SendFile, Target{ChatID: target, ChatRegistered: registered}); err != nil {
			return FileSent{}, err
		}
		dir, rel, masks, err := s.hostPath(ctx, c, sandboxPath)
		if err != nil {
			return FileSent{}, err
		}
		select {
		case s.copies <- struct{}{}:
			defer func() { <-s.copies }()
		case <-ctx.Done():
			return FileSent{}, ctx.Err()
		}
		data, err := readBeneath(s.cfg.SandboxUser, dir, rel, masks, sandboxPath)
		if err != nil {
			return FileSent{}, err
		}
		o := domain.Outgoing{ChatID: target, Text: caption, Kind: kindOf(sandboxPath, data), FileName: fileName(sandboxPath), Created: s.cfg.Now()}
		if _, err := s.cfg.Store.EnqueueFile(ctx, o, data); err != nil {
			return FileSent{}, err
		}
		s.audit(ctx, st, SendFile, "allow", fmt.Sprintf("%s %s (%d bytes) to chat %d", o.Kind, sandboxPath, len(data), target))
		return FileSent{OK: true, ChatID: target, SentAs: o.Kind, Bytes: len(data)}, nil
	})
}

// hostPath maps a sandbox path to the host directory it lies beneath, the
// name below it, and the extra mount's masked paths (hidden from the
// sandbox, so never sent). Only the caller's own folder and its extra
// mounts, as the allowlist allows them now, are reachable.
func (s *Service) hostPath(ctx context.Context, c domain.Caller, p string) (dir, rel string, masks []string, err error) {
	outside := denied{reason: fmt.Sprintf("send_file sends only files under %s/ or %s/<name>/, not %q", groupView, extraView, p)}
	if !path.IsAbs(p) {
		return "", "", nil, outside
	}
	clean := path.Clean(p)
	if rest, ok := cutDir(clean, groupView); ok {
		// The caller's folder is the host's record; a bad one is a bug.
		if c.Group == "" || c.Group == "." || c.Group == ".." || strings.ContainsRune(c.Group, '/') {
			return "", "", nil, fmt.Errorf("caller's folder %q is not a plain name", c.Group)
		}
		return filepath.Join(s.cfg.GroupsDir, c.Group), rest, nil, nil
	}
	rest, ok := cutDir(clean, extraView)
	if !ok || rest == "." {
		return "", "", nil, outside
	}
	name, below, _ := strings.Cut(rest, "/")
	g, registered, err := s.cfg.Store.GroupByFolder(ctx, c.Group)
	if err != nil {
		return "", "", nil, err
	}
	if registered && s.cfg.Mounts != nil {
		ms, _ := s.cfg.Mounts.Resolve(g)
		for _, m := range ms {
			if m.Name == name {
				return m.HostPath, cmp.Or(below, "."), m.Masks, nil
			}
		}
	}
	return "", "", nil, denied{reason: fmt.Sprintf("no extra mount is named %q", name)}
}

// cutDir is the part of the clean path p below dir ("." for dir itself).
func cutDir(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok
}

// readBeneath reads, with u's rights, the regular file rel below root (a
// directory, or the file itself when rel is "."; a mount may be one file):
// no symlink in any component, nothing masked, no FIFO or device (opened
// O_NONBLOCK so a FIFO without a writer cannot hang the open), at most
// MaxSendFile bytes.
func readBeneath(u beneath.User, root, rel string, masks []string, shown string) ([]byte, error) {
	full := filepath.Join(root, rel)
	for _, m := range masks {
		if full == m || strings.HasPrefix(full, m+"/") {
			return nil, denied{reason: fmt.Sprintf("%s is hidden from the sandbox", shown)}
		}
	}
	// The root is the host's to open: the sandbox reaches it through a
	// bind, whatever lies above it on the host.
	rfd, err := beneath.Open(root, unix.O_PATH, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
	fd := -1
	err = u.Do(func() (err error) {
		if rel == "." {
			fd, err = beneath.Reopen(rfd, flags)
		} else {
			fd, err = beneath.Openat(rfd, rel, flags, 0)
		}
		return err
	})
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, denied{reason: fmt.Sprintf("%s has a symlink in its path; send_file follows none", shown)}
	case errors.Is(err, unix.EXDEV):
		return nil, denied{reason: fmt.Sprintf("%s leaves the folder it names", shown)}
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return nil, bad("no file at %s", shown)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return nil, denied{reason: fmt.Sprintf("%s cannot be read by the sandbox", shown)}
	case errors.Is(err, unix.ENXIO): // a socket
		return nil, denied{reason: fmt.Sprintf("%s is not a regular file", shown)}
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", full, err)
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", full, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, denied{reason: fmt.Sprintf("%s is not a regular file", shown)}
	}
	if st.Size > MaxSendFile {
		return nil, denied{reason: fmt.Sprintf("%s is larger than 50 MB (%d bytes)", shown, st.Size)}
	}
	// The file may grow while it is read: read one byte past the cap.
	data, err := io.ReadAll(io.LimitReader(f, MaxSendFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", full, err)
	}
	if len(data) > MaxSendFile {
		return nil, denied{reason: fmt.Sprintf("%s is larger than 50 MB", shown)}
	}
	return data, nil
}

// kindOf sends a JPEG, PNG or WebP image within Telegram's photo limit as a
// photo (its name and its bytes agree), anything else as a document.
func kindOf(name string, data []byte) string {
	if len(data) == 0 || len(data) > MaxPhoto {
		return domain.OutDocument
	}
	want := map[string]string{".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp"}[strings.ToLower(path.Ext(name))]
	if want != "" && http.DetectContentType(data) == want {
		return domain.OutPhoto
	}
	return domain.OutDocument
}

// fileName is the name the chat sees: the path's last element, without
// control or format characters (an RTL override would disguise it), at
// most MaxName bytes.
func fileName(p string) string {
	name := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, path.Base(p))
	for len(name) > MaxName {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	return name
}
