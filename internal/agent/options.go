package agent

import (
	"log/slog"
	"net/http"

	"github.com/clawpen/clawpen/internal/job"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// SocketEnv names the variable that overrides the host socket path.
const SocketEnv = "CLAWPEN_HOST_SOCKET"

// StreamEnv, when "1" or "true", makes the agent use the streaming Messages API.
const StreamEnv = "CLAWPEN_AGENT_STREAM"

// Defaults of a run.
const (
	DefaultMaxTurns  = 30
	DefaultMaxTokens = 8192
	DefaultModel     = "claude-sonnet-4-5"
	// DefaultOpenAIModel is used with provider "openai" when the job names none.
	DefaultOpenAIModel = "gpt-4o"
)

// Options are where the agent finds its world. Defaults are the sandbox paths;
// tests point them at temporary directories.
type Options struct {
	WorkspaceDir string // the group's folder, working directory of bash, base of relative paths
	GlobalDir    string // shared memory (MEMORY.md)
	HomeDir      string // session state: transcript.json, runs.log
	SocketPath   string // the host socket

	Stream bool   // use the streaming Messages API (anthropic only)
	Shell  string // shell for the bash tool; default /bin/bash when present, else /bin/sh

	HTTPClient *http.Client    // default: a client that dials SocketPath
	Emit       func(job.Event) // progress events; nil drops them
	Logger     *slog.Logger    // default: slog.Default()
	Model      Model           // default: NewModel(job.Provider, HTTPClient, Stream)
}

// DefaultOptions are the sandbox contract's paths.
func DefaultOptions() Options {
	return Options{
		WorkspaceDir: sandbox.GroupPath,
		GlobalDir:    sandbox.GlobalPath,
		HomeDir:      sandbox.HomePath,
		SocketPath:   sandbox.SocketPath,
	}
}

// OptionsFromEnv is DefaultOptions adjusted by CLAWPEN_HOST_SOCKET and CLAWPEN_AGENT_STREAM.
func OptionsFromEnv(getenv func(string) string) Options {
	o := DefaultOptions()
	if p := getenv(SocketEnv); p != "" {
		o.SocketPath = p
	}
	switch getenv(StreamEnv) {
	case "1", "true", "yes":
		o.Stream = true
	}
	return o
}
