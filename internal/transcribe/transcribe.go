// Package transcribe turns the audio of a voice note into text on the host
// (DESIGN.md, "Files in and out"): with an OpenAI-compatible
// /v1/audio/transcriptions endpoint (OpenAI, Groq, a local server) and the
// host's key, or with a local program run like a bridge tool. A sandbox
// never takes part: it gets the transcript, as the sender's words, and no
// key, path or program of the host's.
package transcribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawpen/clawpen/internal/tools"
)

// MaxText bounds a transcript: an hour of speech is some 60 KB of text.
const MaxText = 64 << 10

// Placeholder is the element of a command's argv the audio file's path
// replaces.
const Placeholder = "{file}"

// Result is a transcript.
type Result struct {
	Text string
	// Seconds is the length the provider says it heard (OpenAI's usage of
	// type "duration"); 0 when it says none.
	Seconds float64
	// Cut: the transcript was longer than MaxText, and was cut.
	Cut bool
}

// cut bounds text to MaxText, on a character boundary, as valid UTF-8.
func cut(text string) Result {
	text = strings.ToValidUTF8(strings.TrimSpace(text), "\uFFFD")
	if len(text) <= MaxText {
		return Result{Text: text}
	}
	n := MaxText
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return Result{Text: text[:n], Cut: true}
}

// OpenAI is an OpenAI-compatible transcription endpoint.
type OpenAI struct {
	// URL is the server's base, without /v1 (https://api.openai.com,
	// https://api.groq.com/openai, http://127.0.0.1:8080).
	URL string
	// Key is sent as the bearer token; "" sends none (a local server).
	Key     string
	Model   string
	Timeout time.Duration
	// Client supplies the transport (default http.DefaultClient); its
	// redirects are not followed: the key must reach URL's host only.
	Client *http.Client
}

// maxAnswer bounds the provider's JSON answer.
const maxAnswer = 1 << 20

// contentTypes are the audio types the provider is told, by extension.
var contentTypes = map[string]string{
	"ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/ogg", "wav": "audio/wav", "mp3": "audio/mpeg",
	"m4a": "audio/mp4", "mp4": "video/mp4", "flac": "audio/flac", "webm": "audio/webm",
}

// Transcribe posts audio as the multipart form the OpenAI API takes (the
// fields, file name and types the official SDK sends: "file", then
// "model"). The file is named audio.<ext>: the sender's own file name
// never leaves the host. ext is the file's extension, without the dot.
func (o OpenAI) Transcribe(ctx context.Context, audio []byte, ext string) (Result, error) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="file"; filename="audio.`+ext+`"`)
	ct, ok := contentTypes[ext]
	if !ok {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	part, err := w.CreatePart(h)
	if err != nil {
		return Result{}, fmt.Errorf("transcription request: %w", err)
	}
	part.Write(audio) // a bytes.Buffer does not fail
	if err := w.WriteField("model", o.Model); err != nil {
		return Result{}, fmt.Errorf("transcription request: %w", err)
	}
	if err := w.Close(); err != nil {
		return Result{}, fmt.Errorf("transcription request: %w", err)
	}
	url := strings.TrimRight(o.URL, "/") + "/v1/audio/transcriptions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return Result{}, fmt.Errorf("transcription request: %w", err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	if o.Key != "" {
		req.Header.Set("Authorization", "Bearer "+o.Key)
	}
	client := http.DefaultClient
	if o.Client != nil {
		client = o.Client
	}
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("transcription provider: no answer within %s", o.Timeout)
		}
		// The error names the URL at most; the key is in a header.
		return Result{}, fmt.Errorf("transcription provider unreachable: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return Result{}, fmt.Errorf("read the transcription: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("transcription provider answered %s%s", resp.Status, providerMessage(data))
	}
	if len(data) > maxAnswer {
		return Result{}, fmt.Errorf("transcription answer larger than %d bytes", maxAnswer)
	}
	var ans struct {
		Text  *string `json:"text"`
		Usage struct {
			Type    string  `json:"type"`
			Seconds float64 `json:"seconds"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &ans); err != nil || ans.Text == nil {
		return Result{}, errors.New("transcription answer is not JSON with a text")
	}
	res := cut(*ans.Text)
	if ans.Usage.Type == "duration" && ans.Usage.Seconds > 0 {
		res.Seconds = ans.Usage.Seconds
	}
	return res, nil
}

// providerMessage is the error message of a provider's JSON error, briefly.
func providerMessage(data []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
		return ""
	}
	msg := e.Error.Message
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	return ": " + msg
}

// Command is a local program that prints the transcript of the file it is
// given, run as bridge tools are (tools.Tool.Run): no shell, a clean
// environment, no stdin, a timeout, capped output.
type Command struct {
	// Argv is the program and its arguments; one element holds
	// Placeholder, which the audio file's path replaces within it.
	Argv    []string
	Timeout time.Duration
	Getenv  tools.Getenv
}

// ParseCommand splits line on spaces into a Command's argv (no quoting:
// the line is not given to a shell) and checks it.
func ParseCommand(line string) ([]string, error) {
	argv := strings.Fields(line)
	switch {
	case len(argv) == 0:
		return nil, errors.New("no program given")
	case strings.Contains(argv[0], Placeholder):
		return nil, fmt.Errorf("the program itself may not be %s", Placeholder)
	}
	n := 0
	for _, a := range argv[1:] {
		n += strings.Count(a, Placeholder)
	}
	if n != 1 {
		return nil, fmt.Errorf("want %s exactly once among the arguments, e.g. whisper-cli -nt -f %s", Placeholder, Placeholder)
	}
	return argv, nil
}

// Transcribe writes audio to a file of the host's own (a fresh directory
// only the host's user reads, a name the host makes: nothing of the
// sender's or the sandbox's is in the path), runs the program on it, and
// takes its standard output as the transcript.
func (c Command) Transcribe(ctx context.Context, audio []byte, ext string) (Result, error) {
	dir, err := os.MkdirTemp("", "clawpen-transcribe-")
	if err != nil {
		return Result{}, fmt.Errorf("transcription: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "audio."+ext)
	if err := os.WriteFile(file, audio, 0o600); err != nil {
		return Result{}, fmt.Errorf("transcription: %w", err)
	}
	argv := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		argv[i] = strings.Replace(a, Placeholder, file, 1)
	}
	tool := tools.Tool{Timeout: c.Timeout, MaxOutput: MaxText + 1}
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	res, err := tool.Run(ctx, tools.Call{Argv: argv}, getenv)
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("transcription command: %w", err)
	case res.TimedOut:
		return Result{}, fmt.Errorf("transcription command: no answer within %s", c.Timeout)
	case res.ExitCode != 0:
		return Result{}, fmt.Errorf("transcription command exited with %d: %s", res.ExitCode, lastLine(res.Stderr))
	}
	return cut(res.Stdout), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	if s == "" {
		return "no error output"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
