package fakellm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/audio"
)

// The transcription endpoint, as OpenAI documents it: POST
// /v1/audio/transcriptions, a multipart form with the audio as "file" and
// "model", the bearer key; the answer {"text": …, "usage": {"type":
// "duration", "seconds": …}}. What it "hears" is scripted by the file's
// own bytes, so that one file can be slow while another is not:
//
//	SAY: <text>   the transcript is <text> (to the end of its line)
//	FAIL <status> the answer is that HTTP status, with OpenAI's error JSON
//	HOLD          no answer until the client goes away (a slow provider)
//
// Without a directive the transcript names the bytes heard: "heard N
// bytes, sha256 <first 16 hex digits>". The seconds are the file's own
// length (audio.Duration), as the provider would measure them.

var (
	sayRe  = regexp.MustCompile(`SAY: ([^\n\x00]*)`)
	failRe = regexp.MustCompile(`FAIL (\d{3})`)
)

// maxAudio is the API's own upload limit.
const maxAudio = 25 << 20

// Transcription is one transcription request as the fake received it.
type Transcription struct {
	Header      http.Header
	Model       string
	FileName    string
	ContentType string // of the file part
	File        []byte
	Fields      []string // the form's part names, in order
}

// SetTranscribeKey makes transcription requests without this bearer key
// fail with 401 (by default the key SetRequiredKey set, if any).
func (s *Server) SetTranscribeKey(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcribeKey = k
}

// Transcriptions returns a copy of every transcription request so far.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.transcriptions...)
}

func (s *Server) serveTranscription(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, openaiAPI, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	t, err := readTranscription(r)
	s.mu.Lock()
	s.transcriptions = append(s.transcriptions, t)
	key := s.transcribeKey
	if key == "" {
		key = s.requiredKey
	}
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, openaiAPI, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	if err != nil {
		writeError(w, openaiAPI, http.StatusBadRequest, err.Error())
		return
	}
	if bytes.Contains(t.File, []byte("HOLD")) {
		<-r.Context().Done()
		return
	}
	if m := failRe.FindSubmatch(t.File); m != nil {
		status, _ := strconv.Atoi(string(m[1]))
		writeError(w, openaiAPI, status, fmt.Sprintf("injected failure (status %d)", status))
		return
	}
	sum := sha256.Sum256(t.File)
	text := fmt.Sprintf("heard %d bytes, sha256 %x", len(t.File), sum[:8])
	if m := sayRe.FindSubmatch(t.File); m != nil {
		text = string(m[1])
	}
	ans := map[string]any{"text": text}
	if d, err := audio.Duration(t.File); err == nil {
		ans["usage"] = map[string]any{"type": "duration", "seconds": d.Seconds()}
	}
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, ans)
}

// readTranscription reads the form as the API does: "file" and "model"
// are required.
func readTranscription(r *http.Request) (Transcription, error) {
	t := Transcription{Header: r.Header.Clone()}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return t, fmt.Errorf("want a multipart/form-data body, not %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, maxAudio+1<<20), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return t, fmt.Errorf("malformed form: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(p, maxAudio+1))
		if err != nil {
			return t, fmt.Errorf("malformed form: %w", err)
		}
		t.Fields = append(t.Fields, p.FormName())
		switch p.FormName() {
		case "file":
			t.File, t.FileName, t.ContentType = data, p.FileName(), p.Header.Get("Content-Type")
		case "model":
			t.Model = string(data)
		}
	}
	switch {
	case t.File == nil || t.FileName == "":
		return t, errors.New("'file' is a required property")
	case len(t.File) > maxAudio:
		return t, fmt.Errorf("maximum content size limit (%d) exceeded", maxAudio)
	case strings.TrimSpace(t.Model) == "":
		return t, errors.New("you must provide a model parameter")
	}
	return t, nil
}
