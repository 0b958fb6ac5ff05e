package telegram

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
)

// Files users send, as the real client reads them from the fake: the
// update's file (a photo's sizes largest first), then getFile and the
// download link.
func TestIncomingFilesAndDownload(t *testing.T) {
	e := newEnv(t)
	ref := e.srv.AddFile([]byte("%PDF-1.4 body"))
	user := faketg.User{ID: 5, FirstName: "Eve"}
	e.srv.PushMessage(-100, "supergroup", "G", user, "", faketg.Attach("document", ref, "../r.pdf"))
	e.srv.PushMessage(-100, "supergroup", "G", user, "look", faketg.Attach("photo", ref, ""))
	e.srv.PushMessage(-100, "supergroup", "G", user, "", faketg.Attach("video_note", ref, ""))
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 3)
	p.mu.Lock()
	ups := append([]Update(nil), p.updates...)
	p.mu.Unlock()

	doc := ups[0].Message
	require.NotNil(t, doc.File)
	assert.Equal(t, domain.InFile{Type: "document", Name: "../r.pdf", Sizes: []domain.FileVersion{{ID: ref.ID, Bytes: int64(ref.Size)}}}, *doc.File)
	assert.Empty(t, doc.Text)
	assert.Equal(t, "photo", ups[1].Message.File.Type)
	assert.Equal(t, "look", ups[1].Message.Text, "the caption is the text")
	assert.Equal(t, "video", ups[2].Message.File.Type, "a video note is a video")

	data, err := e.c.Download(testCtx(t), ref.ID, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "%PDF-1.4 body", string(data))

	_, err = e.c.Download(testCtx(t), ref.ID, 4)
	assert.ErrorIs(t, err, domain.ErrFileTooLarge)
	e.srv.FailDownloads(1)
	_, err = e.c.Download(testCtx(t), ref.ID, 1<<20)
	assert.ErrorContains(t, err, "500")
	_, err = e.c.Download(testCtx(t), "nope", 1<<20)
	assert.Error(t, err)
	assert.Equal(t, 1, e.srv.Downloads())
}

// Uploads through the real client: a photo and a document, each once,
// with its bytes, name and caption.
func TestSendFile(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.c.SendFile(testCtx(t), 42, 0, domain.OutPhoto, "chart.png", []byte("\x89PNG\r\n\x1a\n"), "a chart"))
	require.NoError(t, e.c.SendFile(testCtx(t), 42, 0, domain.OutDocument, "r.txt", []byte("text"), ""))
	files := e.srv.FilesTo(42)
	require.Len(t, files, 2)
	assert.Equal(t, "photo", files[0].Kind)
	assert.Equal(t, "chart.png", files[0].Name)
	assert.Equal(t, "a chart", files[0].Caption)
	assert.Equal(t, "document", files[1].Kind)
	assert.Equal(t, "text", string(files[1].Data))

	// A photo Telegram refuses goes once more as a document.
	require.NoError(t, e.c.SendFile(testCtx(t), 43, 0, domain.OutPhoto, "huge.png", make([]byte, 11<<20), ""))
	huge := e.srv.FilesTo(43)
	require.Len(t, huge, 1)
	assert.Equal(t, "document", huge[0].Kind)

	e.srv.FailFiles(1)
	err := e.c.SendFile(testCtx(t), 42, 0, domain.OutDocument, "r.txt", []byte("text"), "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testToken)
	assert.Len(t, e.srv.FilesTo(42), 2, "a failed upload sent nothing")
}
