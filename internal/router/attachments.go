package router

// Files users send: fetched into the group's inbox/ before the message is
// stored, so the run it calls finds them. The sender's file name is
// untrusted: the file lands under a name the host makes (date, message id,
// a sanitised extension), and the sender's name is only ever shown escaped.
// A file that cannot be fetched (too large, Telegram failing) leaves the
// message with a note: the message itself is never lost.

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/retry"
)

// Fetcher downloads files users sent (Telegram in production). A file
// over max fails with an error wrapping domain.ErrFileTooLarge.
type Fetcher interface {
	Download(ctx context.Context, fileID string, max int64) ([]byte, error)
}

// InboxView is where the agent finds the group's inbox.
const InboxView = "/workspace/group/inbox"

// fetchWaits are the waits before each download attempt.
var fetchWaits = []time.Duration{0, 500 * time.Millisecond, 2 * time.Second}

// attachment fetches in's file into g's inbox and says what the agent is
// told of it; a failure is a note, never an error.
func (r *Router) attachment(ctx context.Context, g domain.Group, in domain.Inbound) *domain.Attachment {
	f := in.File
	a := &domain.Attachment{Type: f.Type, Name: f.Name}
	limit := r.cfg.MaxFileBytes
	var v *domain.FileVersion
	for i := range f.Sizes {
		if f.Sizes[i].Bytes <= limit {
			v = &f.Sizes[i]
			break
		}
	}
	tooLarge := fmt.Sprintf("not fetched: larger than the %d MB limit", limit>>20)
	if v == nil {
		a.Note = tooLarge
		return a
	}
	if r.cfg.Files == nil || r.cfg.GroupsDir == "" {
		a.Note = "not fetched: this host does not fetch files"
		return a
	}
	var data []byte
	var err error
	for _, wait := range fetchWaits {
		if retry.Sleep(ctx, wait) != nil {
			break
		}
		data, err = r.cfg.Files.Download(ctx, v.ID, limit)
		if err == nil || errors.Is(err, domain.ErrFileTooLarge) {
			break
		}
		r.log.Warn("file download failed", "chat", in.ChatID, "message", in.MessageID, "err", err)
	}
	switch {
	case errors.Is(err, domain.ErrFileTooLarge):
		a.Note = tooLarge
		return a
	case err != nil:
		a.Note = "not fetched: Telegram did not hand the file over"
		return a
	}
	name := inboxName(in, f)
	if err := writeInbox(filepath.Join(r.cfg.GroupsDir, g.Folder, "inbox"), name, data); err != nil {
		r.log.Error("write inbox file", "group", g.Folder, "name", name, "err", err)
		a.Note = "not fetched: the host could not store the file"
		return a
	}
	a.Path = InboxView + "/" + name
	return a
}

// inboxName is the file's name in the inbox: the message's time and id,
// and an extension from the sender's name or type, letters and digits only.
func inboxName(in domain.Inbound, f *domain.InFile) string {
	return in.Time.UTC().Format("20060102-150405") + "-" + strconv.FormatInt(in.MessageID, 10) + "." + extension(f)
}

// extension is a safe extension for f: its name's, else its MIME type's,
// else its type's usual one.
func extension(f *domain.InFile) string {
	clean := func(e string) string {
		e = strings.ToLower(strings.TrimPrefix(e, "."))
		if e == "" || len(e) > 8 {
			return ""
		}
		for _, r := range e {
			if r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return ""
			}
		}
		return e
	}
	if e := clean(filepath.Ext(f.Name)); e != "" {
		return e
	}
	if f.Type == "photo" {
		return "jpg" // Telegram recompresses photos as JPEG
	}
	if exts, _ := mime.ExtensionsByType(f.MIME); len(exts) > 0 {
		if e := clean(exts[0]); e != "" {
			return e
		}
	}
	switch f.Type {
	case "voice":
		return "ogg"
	case "video":
		return "mp4"
	case "audio":
		return "mp3"
	}
	return "bin"
}

// writeInbox writes data as dir/name. The inbox is in a folder the
// sandbox writes, so nothing in it is trusted: the directory is reached
// through no symlink, the file is written under a temporary name (a FIFO
// or link planted there is removed, not opened) and renamed into place.
// The inbox and the file belong to whoever owns the group's folder (on a
// root host, the sandbox user once the folder was handed over), so the
// agent may read and remove them like the rest of its folder.
func writeInbox(dir, name string, data []byte) error {
	if err := beneath.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var owner unix.Stat_t
	if err := beneath.Lstat(filepath.Dir(dir), &owner); err != nil {
		return err
	}
	chown := os.Geteuid() == 0
	dfd, err := beneath.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if chown {
		if err := unix.Fchownat(dfd, "", int(owner.Uid), int(owner.Gid), unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("hand over %s: %w", dir, err)
		}
	}
	tmp := "." + name + ".part"
	if err := unix.Unlinkat(dfd, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	fd, err := beneath.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if chown {
		if err := unix.Fchown(fd, int(owner.Uid), int(owner.Gid)); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("hand over %s: %w", tmp, err)
		}
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("write %s: %w", tmp, err)
		}
		rest = rest[n:]
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
