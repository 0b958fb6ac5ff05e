package faketg

// Files both ways: sendPhoto and sendDocument (multipart uploads, as the
// go-telegram/bot client sends them) are recorded with their bytes; files
// users send are registered with AddFile, attached to a pushed message with
// Attach, and served as Telegram does: getFile answers a file_path, and
// GET /file/bot<token>/<file_path> returns the bytes.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SentFile is one accepted sendPhoto or sendDocument call.
type SentFile struct {
	ChatID    int64
	ThreadID  int
	MessageID int64
	Kind      string // "photo" or "document"
	Name      string // the upload's file name
	Data      []byte
	Caption   string
	Time      time.Time
}

// maxPhoto is Telegram's limit for a photo upload.
const maxPhoto = 10 << 20

// FileRef is a file a user sends, as a message refers to it.
type FileRef struct {
	ID   string
	Size int
}

// SentFiles returns every file accepted by sendPhoto or sendDocument, in order.
func (s *Server) SentFiles() []SentFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentFile(nil), s.files...)
}

// FilesTo returns the files sent to chatID, in order.
func (s *Server) FilesTo(chatID int64) []SentFile {
	var out []SentFile
	for _, f := range s.SentFiles() {
		if f.ChatID == chatID {
			out = append(out, f)
		}
	}
	return out
}

// AddFile stores data as a file users can send (see Attach); getFile and
// downloads serve it.
func (s *Server) AddFile(data []byte) FileRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored == nil {
		s.stored = map[string][]byte{}
	}
	id := fmt.Sprintf("file%d", len(s.stored)+1)
	s.stored[id] = append([]byte(nil), data...)
	return FileRef{ID: id, Size: len(data)}
}

// FailDownloads makes the next n downloads fail with 500.
func (s *Server) FailDownloads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failDownloads = n
}

// FailFiles makes the next n sendPhoto or sendDocument calls fail with 500
// (nothing sent); 0 ends the failures.
func (s *Server) FailFiles(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failFiles = n
}

// HoldDownload makes every download of f wait until release is called
// (or its request ends): a slow transfer.
func (s *Server) HoldDownload(f FileRef) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]chan struct{}{}
	}
	s.held[f.ID] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.held, f.ID)
			close(ch)
		})
	}
}

// Downloads is how many file downloads were answered with the file.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// Attach makes the pushed message carry f as kind: "photo" (one size),
// "document", "voice", "audio", "video" or "video_note"; name is the
// sender's file name (documents, audio, video). The message's text becomes
// its caption.
func Attach(kind string, f FileRef, name string) MsgOpt {
	return func(o *msgOpts) {
		o.caption = true
		obj := map[string]any{"file_id": f.ID, "file_unique_id": "u" + f.ID, "file_size": f.Size}
		switch kind {
		case "photo":
			obj["width"], obj["height"] = 640, 480
			o.extra = map[string]any{"photo": []map[string]any{obj}}
			return
		case "voice", "audio", "video", "video_note":
			obj["duration"] = 3
		}
		if name != "" {
			obj["file_name"] = name
		}
		if kind == "video" {
			obj["width"], obj["height"] = 640, 480
		}
		if kind == "video_note" {
			obj["length"] = 240
		}
		o.extra = map[string]any{kind: obj}
	}
}

// getFile answers a file id with the path to download it from.
func (s *Server) getFile(w http.ResponseWriter, p params) {
	id := p["file_id"]
	s.mu.Lock()
	data, ok := s.stored[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusBadRequest, "Bad Request: invalid file_id", 0)
		return
	}
	writeResult(w, map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(data), "file_path": "documents/" + id})
}

// serveFile is GET /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, path, ok := strings.Cut(rest, "/")
	id, ok2 := strings.CutPrefix(path, "documents/")
	s.mu.Lock()
	hold := s.held[id]
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	required := s.requireToken
	data, found := s.stored[id]
	fail := s.failDownloads > 0
	if fail {
		s.failDownloads--
	} else if found {
		s.downloads++
	}
	s.mu.Unlock()
	switch {
	case !ok || !ok2 || (required != "" && token != required):
		http.NotFound(w, r)
	case fail:
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
	case !found:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
	}
}

// sendFile records a sendPhoto or sendDocument upload.
func (s *Server) sendFile(w http.ResponseWriter, r *http.Request, method string) {
	kind := strings.TrimPrefix(method, "send")
	s.mu.Lock()
	fail := s.failFiles > 0
	if fail {
		s.failFiles--
	}
	s.mu.Unlock()
	if fail {
		writeError(w, http.StatusInternalServerError, describe(http.StatusInternalServerError, 0), 0)
		return
	}
	if err := r.ParseMultipartForm(maxBody); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: can't parse multipart form", 0)
		return
	}
	p := params{}
	for k, v := range r.MultipartForm.Value {
		p[k] = v[0]
	}
	chatID, err := p.int64("chat_id")
	if err != nil || chatID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: chat not found", 0)
		return
	}
	thread, err := p.int64("message_thread_id")
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: wrong parameter message_thread_id", 0)
		return
	}
	fhs := r.MultipartForm.File[kind]
	if len(fhs) != 1 {
		writeError(w, http.StatusBadRequest, "Bad Request: there is no "+kind+" in the request", 0)
		return
	}
	f, err := fhs[0].Open()
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	if kind == "photo" && len(data) > maxPhoto {
		writeError(w, http.StatusBadRequest, "Bad Request: PHOTO_INVALID_DIMENSIONS", 0)
		return
	}
	s.mu.Lock()
	s.msgIDs[chatID]++
	sf := SentFile{ChatID: chatID, ThreadID: int(thread), MessageID: s.msgIDs[chatID], Kind: kind,
		Name: fhs[0].Filename, Data: data, Caption: p["caption"], Time: time.Now()}
	s.files = append(s.files, sf)
	chatType := s.chatTypeLocked(chatID)
	bot := s.bot
	s.notifyLocked()
	s.mu.Unlock()
	msg := map[string]any{
		"message_id": sf.MessageID, "from": bot, "date": sf.Time.Unix(),
		"chat": map[string]any{"id": chatID, "type": chatType},
	}
	obj := map[string]any{"file_id": fmt.Sprintf("sent%d", sf.MessageID), "file_unique_id": fmt.Sprintf("us%d", sf.MessageID), "file_size": len(data)}
	if kind == "photo" {
		obj["width"], obj["height"] = 640, 480
		msg["photo"] = []map[string]any{obj}
	} else {
		obj["file_name"] = sf.Name
		msg["document"] = obj
	}
	if sf.Caption != "" {
		msg["caption"] = sf.Caption
	}
	writeResult(w, msg)
}
