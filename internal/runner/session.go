package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
)

// Forget archives the group's conversation transcript (ArchiveTranscript) and,
// when a run of the group is in progress, again once it has ended: that run
// saves its conversation as it ends, which would undo the forgetting.
func (r *Runner) Forget(folder string) (forgot bool, err error) {
	r.mu.Lock()
	if r.active[folder] > 0 {
		r.forget[folder] = true
	}
	r.mu.Unlock()
	return ArchiveTranscript(r.cfg.DataDir, folder, time.Now())
}

// runEnded counts a run of folder as ended, once its sandbox is gone, and
// forgets its conversation when Forget was called during it.
func (r *Runner) runEnded(folder string) {
	r.mu.Lock()
	r.active[folder]--
	again := r.active[folder] == 0 && r.forget[folder]
	if r.active[folder] == 0 {
		delete(r.active, folder)
		delete(r.forget, folder)
	}
	r.mu.Unlock()
	if again {
		if _, err := ArchiveTranscript(r.cfg.DataDir, folder, time.Now()); err != nil {
			r.cfg.Logger.Error("forget the conversation after the run", "group", folder, "err", err)
		}
	}
}

// ArchiveDir is where forgotten conversations of folder are kept, under the
// data dir, which no sandbox sees.
func ArchiveDir(dataDir, folder string) string { return filepath.Join(dataDir, "transcripts", folder) }

// ArchiveTranscript moves the group's conversation transcript, and one the
// agent set aside as unreadable, out of its session dir into ArchiveDir
// (named by the time they were archived): the group's next run starts with
// no earlier conversation, and nothing is deleted. The session dir is the
// sandbox's to write, so an entry there may be a symlink or a FIFO: it is
// moved itself, never its target, and anything that is not a regular file
// is dropped from the archive (it is not a transcript). It reports whether
// there was anything to forget. A run of the group in progress saves its
// conversation when it ends (see Forget).
func ArchiveTranscript(dataDir, folder string, now time.Time) (forgot bool, err error) {
	// main is reserved for registration, not here; global has no session.
	if folder != domain.MainFolder {
		if err := domain.ValidateFolder(folder); err != nil {
			return false, err
		}
	}
	dir := SessionDir(dataDir, folder)
	archive := ArchiveDir(dataDir, folder)
	var st unix.Stat_t
	switch err := beneath.Lstat(dir, &st); {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT):
		return false, nil // no session dir: the group never ran
	case err != nil:
		return false, fmt.Errorf("forget the conversation of %q: %w", folder, err)
	}
	if err := beneath.MkdirAll(archive, 0o700); err != nil {
		return false, fmt.Errorf("forget the conversation of %q: %w", folder, err)
	}
	stamp := now.UTC().Format("20060102T150405.000000000Z")
	for _, name := range []string{domain.TranscriptFile, domain.BrokenTranscriptFile} {
		kept := stamp + "-" + name
		moved, err := beneath.Move(dir, name, archive, kept)
		if err != nil {
			return forgot, fmt.Errorf("forget the conversation of %q: %w", folder, err)
		}
		if !moved {
			continue
		}
		forgot = true
		if err := beneath.Lstat(filepath.Join(archive, kept), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			if _, err := beneath.Remove(archive, kept); err != nil {
				return forgot, fmt.Errorf("forget the conversation of %q: %w", folder, err)
			}
		}
	}
	return forgot, nil
}
