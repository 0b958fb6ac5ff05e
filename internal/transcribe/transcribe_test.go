package transcribe

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/fakellm"
)

// part is one part of a multipart form as a server sees it.
type part struct {
	Name, FileName, ContentType string
	Body                        string
}

// seen is one request as a server sees it.
type seen struct {
	Method, Path, Auth, MediaType string
	Parts                         []part
}

func recorder(t *testing.T, answer string) (*httptest.Server, func() []seen) {
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		require.NoError(t, err)
		s.MediaType = mt
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			b, _ := io.ReadAll(p)
			s.Parts = append(s.Parts, part{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), string(b)})
		}
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

// The request is the one the official SDK makes for the same file and
// model: method, path, key, form parts with their names, file name and
// types; and both read the same answer.
func TestOpenAIWireMatchesSDK(t *testing.T) {
	audio := []byte("OggS\x00 a voice note")
	srv, got := recorder(t, `{"text":"hello there","usage":{"type":"duration","seconds":2.5}}`)
	sdk := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-transcribe"), option.WithMaxRetries(0))
	want, err := sdk.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(audio), "audio.ogg", "audio/ogg"), Model: "whisper-1",
	})
	require.NoError(t, err)

	res, err := OpenAI{URL: srv.URL, Key: "sk-transcribe", Model: "whisper-1"}.Transcribe(context.Background(), audio, "ogg")
	require.NoError(t, err)
	assert.Equal(t, want.Text, res.Text)
	assert.Equal(t, want.Usage.Seconds, res.Seconds)

	reqs := got()
	require.Len(t, reqs, 2)
	assert.Equal(t, reqs[0], reqs[1], "the SDK's request, then ours")
	assert.Equal(t, seen{Method: "POST", Path: "/v1/audio/transcriptions", Auth: "Bearer sk-transcribe", MediaType: "multipart/form-data",
		Parts: []part{{"file", "audio.ogg", "audio/ogg", string(audio)}, {"model", "", "", "whisper-1"}}}, reqs[1])
}

// The fake provider's endpoint answers the SDK as OpenAI does.
func TestFakeProviderTranscribesForTheSDK(t *testing.T) {
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	llm.SetTranscribeKey("sk-transcribe")
	sdk := openai.NewClient(option.WithBaseURL(llm.URL()+"/v1/"), option.WithAPIKey("sk-transcribe"), option.WithMaxRetries(0))
	res, err := sdk.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(strings.NewReader("RIFF SAY: hi <b>there</b>\n"), "audio.wav", "audio/wav"), Model: "whisper-1",
	})
	require.NoError(t, err)
	assert.Equal(t, "hi <b>there</b>", res.Text)
	require.Len(t, llm.Transcriptions(), 1)
	assert.Equal(t, []string{"file", "model"}, llm.Transcriptions()[0].Fields)

	bad := openai.NewClient(option.WithBaseURL(llm.URL()+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err = bad.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(strings.NewReader("x"), "a.wav", "audio/wav"), Model: "whisper-1"})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 401, apiErr.StatusCode)

	_, err = OpenAI{URL: llm.URL(), Key: "sk-transcribe", Model: "whisper-1"}.Transcribe(context.Background(), []byte("FAIL 503"), "wav")
	assert.ErrorContains(t, err, "transcription provider answered 503 Service Unavailable: injected failure (status 503)")
}

func TestOpenAIFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("not JSON", func(t *testing.T) {
		srv, _ := recorder(t, `hello`)
		_, err := OpenAI{URL: srv.URL, Model: "m"}.Transcribe(ctx, []byte("a"), "ogg")
		assert.ErrorContains(t, err, "not JSON with a text")
	})
	t.Run("no answer in time", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		_, err := OpenAI{URL: srv.URL, Model: "m", Timeout: 50 * time.Millisecond}.Transcribe(ctx, []byte("a"), "ogg")
		assert.ErrorContains(t, err, "no answer within 50ms")
	})
	t.Run("a redirect is not followed with the key", func(t *testing.T) {
		var mu sync.Mutex
		auth := []string{}
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auth = append(auth, r.Header.Get("Authorization"))
			mu.Unlock()
		}))
		t.Cleanup(other.Close)
		srv := httptest.NewServer(http.RedirectHandler(other.URL+"/steal", http.StatusTemporaryRedirect))
		t.Cleanup(srv.Close)
		_, err := OpenAI{URL: srv.URL, Key: "sk-secret", Model: "m"}.Transcribe(ctx, []byte("a"), "ogg")
		assert.ErrorContains(t, err, "307")
		assert.NotContains(t, err.Error(), "sk-secret")
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, auth, "nothing reached the other host")
	})
	t.Run("a long transcript is cut", func(t *testing.T) {
		srv, _ := recorder(t, `{"text":"`+strings.Repeat("é", MaxText)+`"}`)
		res, err := OpenAI{URL: srv.URL, Model: "m"}.Transcribe(ctx, []byte("a"), "ogg")
		require.NoError(t, err)
		assert.True(t, res.Cut)
		assert.LessOrEqual(t, len(res.Text), MaxText)
		assert.True(t, strings.HasSuffix(res.Text, "é"), "cut on a character boundary")
	})
}

func TestParseCommand(t *testing.T) {
	argv, err := ParseCommand("whisper-cli -nt  -f {file}")
	require.NoError(t, err)
	assert.Equal(t, []string{"whisper-cli", "-nt", "-f", "{file}"}, argv)
	argv, err = ParseCommand("tr --input={file}")
	require.NoError(t, err)
	assert.Equal(t, []string{"tr", "--input={file}"}, argv)
	for line, want := range map[string]string{
		"":                       "no program",
		"{file} -x":              "the program itself",
		"whisper -f":             "exactly once",
		"whisper {file} {file}":  "exactly once",
		"whisper {file}x{file}y": "exactly once",
	} {
		_, err := ParseCommand(line)
		assert.ErrorContains(t, err, want, line)
	}
}

// script writes an executable shell script.
func script(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "transcriber")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// The program gets a file of the host's own, a clean environment and no
// stdin; its output is the transcript; it ends at the timeout, and what
// it left behind is gone.
func TestCommand(t *testing.T) {
	ctx := context.Background()
	t.Setenv("CLAWPEN_TRANSCRIBE_KEY", "sk-never-for-the-command")
	prog := script(t, `f="$1"
echo "path=$f"
echo "mode=$(stat -c %a "$f") dirmode=$(stat -c %a "$(dirname "$f")")"
echo "content=$(cat "$f")"
echo "env=$(env | sort | tr '\n' ' ')"
echo "stdin=$(cat)"
`)
	res, err := Command{Argv: []string{prog, "{file}"}, Timeout: 10 * time.Second}.Transcribe(ctx, []byte("voice bytes"), "ogg")
	require.NoError(t, err)
	out := res.Text
	assert.Regexp(t, `path=/.*/clawpen-transcribe-[0-9]+/audio\.ogg\n`, out)
	assert.Contains(t, out, "mode=600 dirmode=700")
	assert.Contains(t, out, "content=voice bytes")
	assert.NotContains(t, out, "sk-never-for-the-command")
	assert.True(t, strings.HasSuffix(out, "stdin="), "no stdin")
	path := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "path=")
	_, err = os.Stat(filepath.Dir(path))
	assert.ErrorIs(t, err, os.ErrNotExist, "the file and its directory are removed")

	_, err = Command{Argv: []string{script(t, "echo broken >&2; exit 3"), "{file}"}, Timeout: 10 * time.Second}.Transcribe(ctx, []byte("a"), "ogg")
	assert.ErrorContains(t, err, "exited with 3: broken")
	_, err = Command{Argv: []string{script(t, "sleep 600 & sleep 600"), "{file}"}, Timeout: 100 * time.Millisecond}.Transcribe(ctx, []byte("a"), "ogg")
	assert.ErrorContains(t, err, "no answer within 100ms")
	_, err = Command{Argv: []string{"/nonexistent/whisper", "{file}"}, Timeout: time.Second}.Transcribe(ctx, []byte("a"), "ogg")
	assert.ErrorContains(t, err, "start /nonexistent/whisper")
	res, err = Command{Argv: []string{script(t, `head -c 70000 /dev/zero | tr '\0' a`), "{file}"}, Timeout: 10 * time.Second}.Transcribe(ctx, []byte("a"), "ogg")
	require.NoError(t, err)
	assert.True(t, res.Cut)
	assert.Len(t, res.Text, MaxText)
}
