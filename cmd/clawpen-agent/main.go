// Command clawpen-agent runs inside the sandbox: it reads one job on stdin,
// runs the agent loop through the host socket and writes JSON-line events on
// stdout. Build it static: CGO_ENABLED=0 go build ./cmd/clawpen-agent.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/clawpen/clawpen/internal/agent"
	"github.com/clawpen/clawpen/internal/domain"
)

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// eventWriter serializes events: progress comes from tool runs, result from main.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) emit(e domain.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e) // stdout gone means the host is gone; nothing left to tell
}

func run(stdin io.Reader, stdout, stderr io.Writer) int {
	out := &eventWriter{enc: json.NewEncoder(stdout)}
	out.emit(domain.Event{Type: domain.EventReady}) // before anything else: the host measures readiness

	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	j, err := domain.DecodeJob(stdin)
	if err != nil {
		out.emit(domain.Event{Type: domain.EventError, Error: fmt.Sprintf("invalid job: %v", err)})
		return 1
	}
	opts := agent.OptionsFromEnv(os.Getenv)
	opts.Logger = log
	opts.Emit = out.emit
	if opts.Gateway, err = agent.GatewayFromEnv(os.Getenv); err != nil {
		out.emit(domain.Event{Type: domain.EventError, Error: fmt.Sprintf("gateway: %v", err)})
		return 1
	}
	if j.Egress {
		// Before the loop: the first command may already fetch something.
		ln, err := agent.ListenEgress(domain.EgressProxyAddr)
		if err != nil {
			out.emit(domain.Event{Type: domain.EventError, Error: fmt.Sprintf("egress proxy: %v", err)})
			return 1
		}
		defer ln.Close()
		if opts.Gateway != nil {
			if err := agent.StartEgressGateway(ctx, ln, *opts.Gateway, log); err != nil {
				out.emit(domain.Event{Type: domain.EventError, Error: fmt.Sprintf("egress proxy: %v", err)})
				return 1
			}
		} else {
			go agent.ServeEgress(ctx, ln, opts.SocketPath, log)
		}
	}
	text, err := agent.Run(ctx, j, opts)
	if err != nil {
		log.Error("agent run failed", "group", j.Group, "err", err)
		out.emit(domain.Event{Type: domain.EventError, Error: err.Error()})
		return 1
	}
	out.emit(domain.Event{Type: domain.EventResult, Text: text})
	return 0
}
