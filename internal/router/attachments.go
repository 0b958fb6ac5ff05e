package router

// Files users send: the message is stored at once, naming where its file
// will be, and the file is fetched into the group's inbox/ beside the update
// loop, so a large download holds back no other chat. A run waits until
// the messages it is given hold no file still being fetched; a restart
// fetches what a crash left unfetched. The sender's file name is untrusted:
// the file lands under a name the host makes (date, message id, a sanitised
// extension), and the sender's name is only ever shown escaped. A file that
// cannot be fetched (too large, Telegram failing) leaves the message with a
// note: the message itself is never lost.

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// fetchWorkers is how many files are fetched at once, over all chats; one
// more fetches the owner's only, so that groups sending large files never
// hold the owner's back.
const fetchWorkers = 2

// beingFetched is the note of a file not fetched yet; a run never sees it
// (it waits), but a listing of the messages may.
const beingFetched = "being fetched"

// planAttachment is what the message says of in's file when it is stored,
// and the Telegram file id still to fetch ("" when nothing is to be
// fetched: the note says why).
func (r *Router) planAttachment(in domain.Inbound) (*domain.Attachment, string) {
	f := in.File
	a := &domain.Attachment{Type: f.Type, Name: f.Name, Speech: f.Speech}
	var v *domain.FileVersion
	for i := range f.Sizes {
		if f.Sizes[i].Bytes <= r.cfg.MaxFileBytes {
			v = &f.Sizes[i]
			break
		}
	}
	switch {
	case v == nil:
		a.Note = r.tooLarge()
		return a, ""
	case r.cfg.Files == nil || r.cfg.GroupsDir == "":
		a.Note = "not fetched: this host does not fetch files"
		return a, ""
	}
	a.Path = InboxView + "/" + inboxName(in, f)
	a.Note = beingFetched
	return a, v.ID
}

func (r *Router) tooLarge() string {
	return fmt.Sprintf("not fetched: larger than the %d MB limit", r.cfg.MaxFileBytes>>20)
}

// fetchFile downloads message m's file into folder's inbox, at the name its
// attachment gives, and says what became of it; a failure is a note, never
// an error. ctx ending leaves it as it was (to be fetched).
func (r *Router) fetchFile(ctx context.Context, folder string, m domain.Message) *domain.Attachment {
	a := *m.Attachment
	a.Note = ""
	var data []byte
	var err error
	for _, wait := range fetchWaits {
		if err = retry.Sleep(ctx, wait); err != nil {
			return m.Attachment
		}
		data, err = r.cfg.Files.Download(ctx, m.FileToFetch, r.cfg.MaxFileBytes)
		if err == nil || errors.Is(err, domain.ErrFileTooLarge) || ctx.Err() != nil {
			break
		}
		r.log.Warn("file download failed", "chat", m.ChatID, "message", m.MessageID, "err", err)
	}
	switch {
	case ctx.Err() != nil:
		return m.Attachment
	case errors.Is(err, domain.ErrFileTooLarge):
		a.Path, a.Note = "", r.tooLarge()
		return &a
	case err != nil:
		a.Path, a.Note = "", "not fetched: Telegram did not hand the file over"
		return &a
	}
	name := path.Base(a.Path)
	if err := r.writeInbox(ctx, filepath.Join(r.cfg.GroupsDir, folder), name, data); err != nil {
		r.log.Error("write inbox file", "group", folder, "name", name, "err", err)
		a.Path, a.Note = "", "not fetched: the host could not store the file"
		return &a
	}
	// From the bytes in hand, not the inbox file, which the group's
	// sandbox may already be replacing.
	r.transcribeInto(ctx, folder, &a, data)
	if ctx.Err() != nil {
		return m.Attachment
	}
	return &a
}

// fetch is one file to fetch: message m of folder's chat.
type fetch struct {
	folder string
	m      domain.Message
}

// fetchQueue holds the files to fetch, in the order their messages came,
// each once (a restart's recovery and a replayed update may both add one).
// A group's files are fetched (and transcribed) one at a time, so that one
// group's slow downloads or transcriptions hold at most one worker.
type fetchQueue struct {
	mu     sync.Mutex
	more   *sync.Cond // a file was added or done, or the workers are to stop
	jobs   []fetch
	queued map[int64]bool  // by message seq, until fetched
	busy   map[string]bool // groups other than main with a file being fetched
}

func newFetchQueue() *fetchQueue {
	q := &fetchQueue{queued: map[int64]bool{}, busy: map[string]bool{}}
	q.more = sync.NewCond(&q.mu)
	return q
}

func (q *fetchQueue) add(f fetch) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[f.m.Seq] {
		return
	}
	q.queued[f.m.Seq] = true
	q.jobs = append(q.jobs, f)
	q.more.Broadcast()
}

// next waits for the next file to fetch (the owner's first, then the
// first of a group with none being fetched; with ownerOnly, only the
// owner's) until ctx is done. done must be called with it.
func (q *fetchQueue) next(ctx context.Context, ownerOnly bool) (fetch, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ctx.Err() == nil {
		i := slices.IndexFunc(q.jobs, func(f fetch) bool { return f.folder == domain.MainFolder })
		if i < 0 && !ownerOnly {
			i = slices.IndexFunc(q.jobs, func(f fetch) bool { return !q.busy[f.folder] })
		}
		if i >= 0 {
			f := q.jobs[i]
			q.jobs = slices.Delete(q.jobs, i, i+1)
			if f.folder != domain.MainFolder {
				q.busy[f.folder] = true
			}
			return f, true
		}
		q.more.Wait()
	}
	return fetch{}, false
}

// stop wakes every waiting worker to see that its context is done.
func (q *fetchQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.more.Broadcast()
}

// done ends f's turn: recorded says its file was recorded fetched (else a
// restart fetches it again).
func (q *fetchQueue) done(f fetch, recorded bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if recorded {
		delete(q.queued, f.m.Seq)
	}
	delete(q.busy, f.folder)
	q.more.Broadcast()
}

// recoverFetches queues the files a restart left unfetched.
func (r *Router) recoverFetches(ctx context.Context) error {
	left, err := r.cfg.Store.MessagesToFetch(ctx)
	if err != nil {
		return fmt.Errorf("recover files to fetch: %w", err)
	}
	for _, m := range left {
		g, ok, err := r.cfg.Store.GroupByChat(ctx, m.ChatID)
		if err != nil {
			return fmt.Errorf("recover files to fetch: %w", err)
		}
		if !ok || m.Attachment == nil {
			// The group was unregistered: nothing will run over it.
			a := domain.Attachment{Note: "not fetched: the group was unregistered"}
			if m.Attachment != nil {
				a.Type, a.Name = m.Attachment.Type, m.Attachment.Name
			}
			if err := r.cfg.Store.SetFetched(ctx, m.Seq, &a); err != nil {
				return fmt.Errorf("recover files to fetch: %w", err)
			}
			continue
		}
		r.fetches.add(fetch{folder: g.Folder, m: m})
	}
	return nil
}

// fetchFiles fetches queued files until ctx is done, and returns once
// every worker has stopped.
func (r *Router) fetchFiles(ctx context.Context) {
	defer context.AfterFunc(ctx, r.fetches.stop)()
	var wg sync.WaitGroup
	for i := range fetchWorkers + 1 {
		wg.Go(func() {
			for {
				f, ok := r.fetches.next(ctx, i == fetchWorkers)
				if !ok {
					return
				}
				a := r.fetchFile(ctx, f.folder, f.m)
				if ctx.Err() != nil {
					r.fetches.done(f, false)
					return // still to fetch: the next start does
				}
				recorded := r.recordFetched(ctx, f, a)
				r.fetches.done(f, recorded)
				if recorded {
					r.q.kick(f.folder) // a run may have waited for it
				}
			}
		})
	}
	wg.Wait()
}

// recordFetched stores what became of f's file, retrying a failing store
// until ctx ends (the group's runs wait for it); false when it could not.
func (r *Router) recordFetched(ctx context.Context, f fetch, a *domain.Attachment) bool {
	return retry.Until(ctx, retry.Backoff{First: 200 * time.Millisecond, Max: 10 * time.Second},
		func() error { return r.cfg.Store.SetFetched(ctx, f.m.Seq, a) },
		func(err error, d time.Duration) {
			r.log.Error("recording a fetched file failed, retrying", "group", f.folder, "message", f.m.MessageID, "err", err, "in", d)
		}) == nil
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

// writeInbox writes data as inbox/name in the group's folder, with the
// sandbox user's rights (beneath.User): the inbox is the sandbox's to
// write, so the host does there only what the sandbox itself could, and
// what it makes is the sandbox user's. The folder is handed to that user
// first if it is not yet (a group that has not run). Nothing in it is
// trusted: the inbox is reached through no symlink, the file is written
// under a temporary name (a FIFO or link planted there is removed, not
// opened) and renamed into place.
func (r *Router) writeInbox(ctx context.Context, folder, name string, data []byte) error {
	rep, err := r.cfg.SandboxUser.Own(ctx, folder, 0o755)
	if err != nil {
		return err
	}
	if rep.Changed > 0 {
		r.log.Info("handed a folder to the sandbox user", "path", folder, "entries", rep.Entries, "changed", rep.Changed,
			"skipped", rep.Skipped, "cut_short", rep.CutShort)
	}
	root, err := beneath.Open(folder, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	return r.cfg.SandboxUser.Do(func() error { return writeBeneath(root, "inbox", name, data) })
}

// writeBeneath writes data as dir/name below root, making dir when missing.
func writeBeneath(root int, dir, name string, data []byte) error {
	if err := unix.Mkdirat(root, dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	dfd, err := beneath.Openat(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	tmp := "." + name + ".part"
	if err := unix.Unlinkat(dfd, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	fd, err := beneath.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
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
