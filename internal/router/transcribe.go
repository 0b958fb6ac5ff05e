package router

// Voice notes, audio files and video notes are transcribed on the host, by
// the fetch worker that fetched them, before the run that needs them (the
// run waits for the fetch): the agent gets the transcript inside the
// attachment's element, escaped like every other word of the sender's. A
// transcription that cannot be made leaves the message as it is, with a
// note saying why; nothing is dropped.

import (
	"context"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/clawpen/clawpen/internal/audio"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/transcribe"
)

// Transcriber turns a recording into text: an OpenAI-compatible endpoint
// or a local command (package transcribe). ext is the file's extension.
type Transcriber interface {
	Transcribe(ctx context.Context, audio []byte, ext string) (transcribe.Result, error)
}

// transcribeInto sets a's transcript, or its note, for the recording data
// of folder's message. Whatever happens the message stays; only ctx ending
// leaves a as it was (the fetch is redone at the next start).
func (r *Router) transcribeInto(ctx context.Context, folder string, a *domain.Attachment, data []byte) {
	if !a.Speech || r.cfg.Transcriber == nil || a.Path == "" {
		return
	}
	g, ok, err := r.cfg.Store.GroupByFolder(ctx, folder)
	if err != nil || !ok {
		a.Note = "not transcribed: the host could not read the group"
		return
	}
	if r.cfg.Profile != nil {
		p, err := r.cfg.Profile(g.ProfileName())
		switch {
		case err != nil:
			a.Note = "not transcribed: the group's profile cannot be used"
			return
		case p.NoTranscribe:
			a.Note = "not transcribed: transcription is off for this group"
			return
		}
	}
	// Measured before anything is paid: the sender's claim of a length
	// is never used.
	length, err := audio.Duration(data)
	if err != nil {
		a.Note = "not transcribed: " + err.Error()
		return
	}
	secs := int64(math.Ceil(length.Seconds()))
	day := domain.Day(r.now(), r.cfg.TZ)
	if limit := r.cfg.TranscribeDailySeconds; limit > 0 && folder != domain.MainFolder {
		used, err := r.cfg.Store.TranscribedOn(ctx, folder, day)
		switch {
		case err != nil: // fail closed: the limit cannot be checked
			r.log.Error("read transcribed audio", "group", folder, "err", err)
			a.Note = "not transcribed: the host could not check this group's daily limit"
			return
		case used+secs > limit:
			a.Note = fmt.Sprintf("not transcribed: this group's %d minutes of transcription a day would be passed", limit/60)
			return
		}
	}
	res, err := r.cfg.Transcriber.Transcribe(ctx, data, strings.TrimPrefix(path.Ext(a.Path), "."))
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// The error may quote the provider or the program: the log's, not
		// the chat's.
		r.log.Warn("transcription failed", "group", folder, "err", err)
		a.Note = "not transcribed: the transcriber failed"
		return
	}
	secs = max(secs, int64(math.Ceil(res.Seconds)))
	if err := r.cfg.Store.AddTranscribed(ctx, folder, day, secs); err != nil {
		r.log.Error("record transcribed audio", "group", folder, "seconds", secs, "err", err)
	}
	a.Transcript = res.Text
	switch {
	case res.Text == "":
		a.Note = "transcribed: no speech heard"
	case res.Cut:
		a.Note = fmt.Sprintf("transcript cut at %d KB", transcribe.MaxText>>10)
	}
}
