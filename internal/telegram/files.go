package telegram

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/clawpen/clawpen/internal/domain"
)

// fileRequestTimeout bounds one upload: 50 MB at a slow 2 Mbit/s.
const fileRequestTimeout = 4 * time.Minute

// SendFile delivers one file as a photo or a document (kind), with a plain
// text caption, in one attempt, paced and failing as Send does. A photo
// Telegram refuses (its dimensions, say) is sent once more as a document:
// nothing was sent the first time.
func (c *Client) SendFile(ctx context.Context, chatID int64, threadID int, kind, name string, data []byte, caption string) error {
	for {
		if err := c.pace.wait(ctx, chatID); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, fileRequestTimeout)
		upload := &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}
		var err error
		if kind == domain.OutPhoto {
			_, err = c.b.SendPhoto(rctx, &bot.SendPhotoParams{ChatID: chatID, MessageThreadID: threadID, Photo: upload, Caption: caption})
		} else {
			_, err = c.b.SendDocument(rctx, &bot.SendDocumentParams{ChatID: chatID, MessageThreadID: threadID, Document: upload, Caption: caption})
		}
		cancel()
		if err == nil {
			c.log.Debug("sent file", "chat_id", chatID, "thread_id", threadID, "kind", kind, "bytes", len(data))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = c.redact(err)
		if kind == domain.OutPhoto && refusedAs(err, bot.ErrorBadRequest) {
			c.log.Warn("photo rejected, sending as a document", "chat_id", chatID, "err", err)
			kind = domain.OutDocument
			continue
		}
		return sendFailure(chatID, "send file", err)
	}
}

// Download fetches a file users sent (getFile, then its download link),
// at most max bytes: a larger one is domain.ErrFileTooLarge, known before the
// download when Telegram says its size. One attempt; the caller retries.
func (c *Client) Download(ctx context.Context, fileID string, max int64) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, fileRequestTimeout)
	defer cancel()
	f, err := c.b.GetFile(rctx, &bot.GetFileParams{FileID: fileID})
	if err != nil {
		return nil, fmt.Errorf("telegram: getFile: %w", c.redact(err))
	}
	if f.FileSize > max {
		return nil, fmt.Errorf("%w (%d bytes)", domain.ErrFileTooLarge, f.FileSize)
	}
	if f.FilePath == "" {
		return nil, errors.New("telegram: getFile answered no file_path")
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.b.FileDownloadLink(f), nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: download: %w", c.redact(err))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram: download: %w", c.redact(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("telegram: download: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("telegram: download: %w", c.redact(err))
	}
	if int64(len(data)) > max {
		return nil, domain.ErrFileTooLarge
	}
	return data, nil
}

// inFile is the file of m the host may fetch: a photo (every size,
// largest first), a document, a voice note, an audio file, a video or a
// video note (as a video). A GIF stays a described medium.
func inFile(m *models.Message) *domain.InFile {
	one := func(typ, id string, size int64, name, mime string) *domain.InFile {
		return &domain.InFile{Type: typ, Name: name, MIME: mime, Sizes: []domain.FileVersion{{ID: id, Bytes: size}}}
	}
	switch {
	case len(m.Photo) > 0:
		f := &domain.InFile{Type: "photo", MIME: "image/jpeg"}
		for _, p := range m.Photo {
			f.Sizes = append(f.Sizes, domain.FileVersion{ID: p.FileID, Bytes: int64(p.FileSize)})
		}
		slices.SortStableFunc(f.Sizes, func(a, b domain.FileVersion) int { return cmp.Compare(b.Bytes, a.Bytes) })
		return f
	case m.Animation != nil:
		return nil
	case m.Video != nil:
		return one("video", m.Video.FileID, m.Video.FileSize, m.Video.FileName, m.Video.MimeType)
	case m.VideoNote != nil:
		f := one("video", m.VideoNote.FileID, int64(m.VideoNote.FileSize), "", "video/mp4")
		f.Speech = true
		return f
	case m.Voice != nil:
		f := one("voice", m.Voice.FileID, m.Voice.FileSize, "", m.Voice.MimeType)
		f.Speech = true
		return f
	case m.Audio != nil:
		f := one("audio", m.Audio.FileID, m.Audio.FileSize, m.Audio.FileName, m.Audio.MimeType)
		f.Speech = true
		return f
	case m.Document != nil:
		return one("document", m.Document.FileID, m.Document.FileSize, m.Document.FileName, m.Document.MimeType)
	}
	return nil
}
