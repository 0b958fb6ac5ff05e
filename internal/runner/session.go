package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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

// maxArchiveCopy bounds one transcript the host copies into the archive:
// the model proxy takes no request past 8 MiB, so no conversation a model
// can be asked about is larger.
const maxArchiveCopy = 16 << 20

// mayCompact reports whether the conversation of folder's coming run may
// pass budget tokens (domain.EstimateTokens of the transcript's bytes, the
// prompt's and the most the agent's system prompt can be), so the agent
// may summarise its older turns: it never reckons more than this.
func (r *Runner) mayCompact(folder, prompt string, budget int64) bool {
	var st unix.Stat_t
	if err := beneath.Lstat(filepath.Join(SessionDir(r.cfg.DataDir, folder), domain.TranscriptFile), &st); err != nil {
		return false // no conversation yet
	}
	n := st.Size + int64(len(prompt)) + domain.MaxInstructionBytes
	for _, dir := range []string{filepath.Join(r.cfg.GroupsDir, folder), filepath.Join(r.cfg.GroupsDir, domain.GlobalFolder)} {
		n += memoryBound(filepath.Join(dir, "MEMORY.md"))
	}
	return domain.EstimateTokens(n) > budget
}

// memoryBound is the most of a MEMORY.md the agent puts in its system
// prompt: the file's size, within the agent's cap and the note of a cut;
// the cap when the host cannot tell (the agent follows what the host
// does not).
func memoryBound(path string) int64 {
	var st unix.Stat_t
	err := beneath.Lstat(path, &st)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT):
		return 0
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		return min(st.Size, domain.MaxMemoryBytes) + 128
	}
	return domain.MaxMemoryBytes + 128
}

// ArchiveCopy copies folder's transcript into ArchiveDir, as
// <time>-before-compaction-transcript.json, before a run that may compact
// it: the archive then holds every turn the summary replaces. The session
// dir is the sandbox's to write, so the transcript is opened through no
// symlink, must be a regular file of at most maxArchiveCopy bytes, and is
// not copied when the group's archive would pass limit bytes (its disk
// quota): a group cannot make the host store without bound.
func ArchiveCopy(dataDir, folder string, limit int64, now time.Time) error {
	src := filepath.Join(SessionDir(dataDir, folder), domain.TranscriptFile)
	fd, err := beneath.Open(src, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	f := os.NewFile(uintptr(fd), src)
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("archive the transcript of %q: not a regular file", folder)
	case st.Size() > maxArchiveCopy:
		return fmt.Errorf("archive the transcript of %q: larger than %d MiB", folder, maxArchiveCopy>>20)
	}
	archive := ArchiveDir(dataDir, folder)
	if err := beneath.MkdirAll(archive, 0o700); err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	held := int64(0)
	entries, err := os.ReadDir(archive)
	if err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			held += fi.Size()
		}
	}
	if limit > 0 && held+st.Size() > limit {
		return fmt.Errorf("archive the transcript of %q: the archive holds %d MiB, and this copy would pass the group's %d MiB", folder, held>>20, limit>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxArchiveCopy+1))
	if err != nil || int64(len(data)) > maxArchiveCopy {
		return fmt.Errorf("archive the transcript of %q: read: %v", folder, err)
	}
	dfd, err := beneath.Open(archive, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	defer unix.Close(dfd)
	name := now.UTC().Format("20060102T150405.000000000Z") + "-before-compaction-" + domain.TranscriptFile
	out, err := beneath.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	w := os.NewFile(uintptr(out), name)
	if _, err := w.Write(data); err != nil {
		w.Close()
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("archive the transcript of %q: %w", folder, err)
	}
	return nil
}
