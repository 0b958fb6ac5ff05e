package agent

import (
	"log/slog"
	"net/http"

	"github.com/clawpen/clawpen/internal/domain"
)

// SocketEnv names the variable that overrides the host socket path.
const SocketEnv = "CLAWPEN_HOST_SOCKET"

// Defaults of a run.
const (
	DefaultMaxTurns  = 30
	DefaultMaxTokens = 8192
)

// Options are where the agent finds its world. Defaults are the sandbox paths;
// tests point them at temporary directories.
type Options struct {
	WorkspaceDir string // the group's folder, working directory of bash, base of relative paths
	GlobalDir    string // shared memory (MEMORY.md)
	HomeDir      string // session state: transcript.json, runs.log
	SocketPath   string // the host socket
	// Gateway, when set, is used instead of SocketPath: the host's TLS
	// gateway (GatewayFromEnv).
	Gateway *Gateway

	Shell string // shell for the bash tool; default /bin/bash when present, else /bin/sh

	HTTPClient *http.Client       // default: a client that dials Gateway or SocketPath
	Emit       func(domain.Event) // progress events; nil drops them
	Logger     *slog.Logger       // default: slog.Default()
	Model      Model              // default: NewModel(Job.Provider, HTTPClient)
}

// DefaultOptions are the sandbox contract's paths.
func DefaultOptions() Options {
	return Options{
		WorkspaceDir: domain.GroupPath,
		GlobalDir:    domain.GlobalPath,
		HomeDir:      domain.HomePath,
		SocketPath:   domain.SocketPath,
	}
}

// OptionsFromEnv is DefaultOptions adjusted by CLAWPEN_HOST_SOCKET.
func OptionsFromEnv(getenv func(string) string) Options {
	o := DefaultOptions()
	if p := getenv(SocketEnv); p != "" {
		o.SocketPath = p
	}
	return o
}
