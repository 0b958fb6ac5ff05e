package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/gateway"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// parseEvents decodes stdout lines with the host's parser.
func parseEvents(t *testing.T, out []byte) []domain.Event {
	t.Helper()
	var evs []domain.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		ev, err := domain.ParseEvent(sc.Bytes())
		require.NoError(t, err, "line %q", sc.Text())
		evs = append(evs, ev)
	}
	return evs
}

// serveLLM serves the fake provider on a unix socket and returns its path.
func serveLLM(t *testing.T) (*fakellm.Server, string) {
	t.Helper()
	llm := fakellm.NewHandler()
	dir, err := os.MkdirTemp("", "cpm")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: llm}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return llm, sock
}

func isolatedJob(prompt string) []byte {
	b, _ := json.Marshal(domain.Job{Version: domain.JobVersion, Group: "g", Model: "m", ContextMode: "isolated", Prompt: prompt})
	return b
}

func TestRunInProcess(t *testing.T) {
	// wantErr is the start of the error event's text; the JSON library's
	// own wording after it is not this program's to pin.
	tests := []struct {
		name     string
		stdin    string
		wantCode int
		wantErr  []string
	}{
		{"empty stdin", "", 1, []string{"invalid job: decode job: ", "unexpected EOF"}},
		{"wrong version", `{"v":2,"group":"g","prompt":"p","context_mode":"group"}`, 1, []string{"invalid job: job version 2, want 1"}},
		{"unknown field", `{"v":1,"group":"g","prompt":"p","context_mode":"group","evil":1}`, 1,
			[]string{"invalid job: decode job: ", `unknown object member name "evil"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(strings.NewReader(tt.stdin), &stdout, &stderr)
			assert.Equal(t, tt.wantCode, code)
			events := parseEvents(t, stdout.Bytes())
			require.Len(t, events, 2)
			assert.Equal(t, domain.Event{Type: domain.EventReady}, events[0])
			assert.Equal(t, domain.EventError, events[1].Type)
			assert.True(t, strings.HasPrefix(events[1].Error, tt.wantErr[0]), "error %q", events[1].Error)
			for _, part := range tt.wantErr[1:] {
				assert.Contains(t, events[1].Error, part)
			}
		})
	}
}

func TestRunInProcessAgainstSocket(t *testing.T) {
	llm, sock := serveLLM(t)
	t.Setenv("CLAWPEN_HOST_SOCKET", sock)
	var stdout, stderr bytes.Buffer
	code := run(bytes.NewReader(isolatedJob("hi there")), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, []domain.Event{{Type: domain.EventReady}, {Type: domain.EventProgress, Text: "echo: hi there"},
		{Type: domain.EventResult, Text: "echo: hi there"}}, parseEvents(t, stdout.Bytes()))
	assert.Len(t, llm.Requests(), 1)
}

func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "clawpen-agent")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "binary has a dynamic loader")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "binary has a dynamic section")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs)

	t.Run("invalid job", func(t *testing.T) {
		cmd := exec.Command(bin)
		cmd.Stdin = strings.NewReader("not json")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		err := cmd.Run()
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr)
		assert.Equal(t, 1, exitErr.ExitCode())
		evs := parseEvents(t, stdout.Bytes())
		require.Len(t, evs, 2)
		assert.Equal(t, domain.EventReady, evs[0].Type)
		assert.Equal(t, domain.EventError, evs[1].Type)
		assert.Contains(t, evs[1].Error, "invalid job")
	})

	t.Run("echo through the socket", func(t *testing.T) {
		llm, sock := serveLLM(t)
		cmd := exec.Command(bin)
		cmd.Env = []string{"CLAWPEN_HOST_SOCKET=" + sock, "ANTHROPIC_API_KEY=must-not-be-sent"}
		cmd.Stdin = bytes.NewReader(isolatedJob("from the binary"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), stderr.String())
		// The streamed answer shows as progress first, then the result.
		assert.Equal(t, []domain.Event{{Type: domain.EventReady}, {Type: domain.EventProgress, Text: "echo: from the binary"},
			{Type: domain.EventResult, Text: "echo: from the binary"}}, parseEvents(t, stdout.Bytes()))
		reqs := llm.Requests()
		require.Len(t, reqs, 1)
		assert.Empty(t, reqs[0].Header.Get("X-Api-Key"), "the agent never sends a key, even one in its env")
	})
}

// TestRunInProcessThroughGateway: with the gateway's variables set, the
// agent reaches its host through the real gateway only (its socket path
// leads nowhere), and a half-set gateway is an error before any request.
func TestRunInProcessThroughGateway(t *testing.T) {
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	g, err := gateway.Listen("127.0.0.1:0", gateway.Config{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	s, err := hostsock.New(domain.Caller{Group: "g", Run: "r"}, hostsock.Config{
		Anthropic: hostsock.Upstream{BaseURL: llm.URL(), APIKey: "k"}, Model: "m"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cred, end, err := g.Register(s)
	require.NoError(t, err)
	t.Cleanup(end)

	dir := t.TempDir()
	ca, credFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "credential")
	require.NoError(t, os.WriteFile(ca, g.CACert(), 0o600))
	require.NoError(t, os.WriteFile(credFile, []byte(cred), 0o600))
	t.Setenv("CLAWPEN_HOST_SOCKET", filepath.Join(dir, "none.sock"))
	t.Setenv(agent.GatewayURLEnv, "https://"+g.Addr().String())
	t.Setenv(agent.GatewayCAEnv, ca)

	var stdout, stderr bytes.Buffer
	code := run(bytes.NewReader(isolatedJob("hi there")), &stdout, &stderr)
	assert.Equal(t, 1, code)
	evs := parseEvents(t, stdout.Bytes())
	require.Len(t, evs, 2)
	assert.Contains(t, evs[1].Error, agent.GatewayCredentialEnv)
	assert.Empty(t, llm.Requests())

	t.Setenv(agent.GatewayCredentialEnv, credFile)
	stdout.Reset()
	code = run(bytes.NewReader(isolatedJob("hi there")), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	evs = parseEvents(t, stdout.Bytes())
	assert.Equal(t, domain.Event{Type: domain.EventResult, Text: "echo: hi there"}, evs[len(evs)-1])
	assert.Len(t, llm.Requests(), 1)
}
