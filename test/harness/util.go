package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
)

// Texts are the sent messages' texts as a person reads them.
func Texts(sent []faketg.SentMessage) []string {
	var out []string
	for _, s := range sent {
		out = append(out, Plain(s.Text))
	}
	return out
}

var tagRE = regexp.MustCompile(`</?(b|i|u|s|code|pre|a|blockquote)( [^>]*)?>`)

// Plain turns Telegram HTML back into the text a person reads.
func Plain(s string) string { return html.UnescapeString(tagRE.ReplaceAllString(s, "")) }

// LineLog collects a process's output and lets tests wait for a line.
type LineLog struct {
	mu   sync.Mutex
	buf  strings.Builder
	cond chan struct{}
}

// NewLineLog is an empty log.
func NewLineLog() *LineLog { return &LineLog{cond: make(chan struct{})} }

func (l *LineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	close(l.cond)
	l.cond = make(chan struct{})
	l.mu.Unlock()
	return len(p), nil
}

// Reset forgets what was written (a restarted process starts a new log).
func (l *LineLog) Reset() {
	l.mu.Lock()
	l.buf.Reset()
	l.mu.Unlock()
}

func (l *LineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Wait waits until the log contains substr, or ctx ends (false).
func (l *LineLog) Wait(ctx context.Context, substr string) bool { return l.WaitCount(ctx, substr, 1) }

// WaitCount waits until the log contains substr n times, or ctx ends (false).
func (l *LineLog) WaitCount(ctx context.Context, substr string, n int) bool {
	for {
		l.mu.Lock()
		has, ch := strings.Count(l.buf.String(), substr) >= n, l.cond
		l.mu.Unlock()
		if has {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// GrepFiles reports which files under root contain needle.
func GrepFiles(t testing.TB, root string, needle []byte) []string {
	t.Helper()
	var hits []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		data, _ := io.ReadAll(bufio.NewReader(f))
		if strings.Contains(string(data), string(needle)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// PromptOf is the newest user text of a model request: the job's prompt.
func PromptOf(r fakellm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && m.Text() != "" {
			return m.Text()
		}
	}
	return ""
}

// Ctx is a context bounded for one wait in a test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	t.Cleanup(cancel)
	return ctx
}

// FileUID is the owner of a file.
func FileUID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// VoiceWAV is a WAV voice note of secs seconds of silence whose "speech"
// is the fake transcribers' script (fakellm's transcription endpoint):
// "SAY: <words>", "HOLD" or "FAIL 500", in a chunk of its own.
func VoiceWAV(secs int, script string) []byte {
	n := secs * 8000
	note := script + "\n"
	if len(note)%2 == 1 {
		note += "\n"
	}
	b := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = append(b, 1, 0, 1, 0) // PCM, mono
	b = binary.LittleEndian.AppendUint32(b, 8000)
	b = binary.LittleEndian.AppendUint32(b, 8000)
	b = append(b, 1, 0, 8, 0, 'n', 'o', 't', 'e')
	b = binary.LittleEndian.AppendUint32(b, uint32(len(note)))
	b = append(b, note...)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, make([]byte, n)...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return b
}
