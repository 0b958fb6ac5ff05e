package app

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
)

// Redacted replaces a secret wherever it would appear in a log line.
const Redacted = "[REDACTED]"

// minSecretLen: a value shorter than this is not treated as a secret to
// search for, or a one-letter test key would blank every "a" in the log.
const minSecretLen = 8

// NewLogger is the host's logger: slog's text handler, or its JSON handler
// with CLAWPEN_LOG_FORMAT=json, that never writes the bot token or a
// provider key. Errors of HTTP clients quote URLs, and Telegram's URLs hold
// the token, so every value is searched, whatever its key.
func NewLogger(w io.Writer, cfg config.Config, level slog.Level) *slog.Logger {
	secrets := secretsOf(cfg)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		return redactAttr(a, secrets)
	}}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// secretsOf lists the configuration's secrets, longest first, so a secret
// that contains another is replaced whole. The bot token's part after the
// colon is its secret on its own.
func secretsOf(cfg config.Config) []string {
	var out []string
	for _, s := range []string{cfg.TelegramToken, cfg.AnthropicKey, cfg.OpenAIKey, cfg.TranscribeKey} {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	if _, after, ok := strings.Cut(cfg.TelegramToken, ":"); ok && len(after) >= minSecretLen {
		out = append(out, after)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func redact(s string, secrets []string) (string, bool) {
	changed := false
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			s, changed = strings.ReplaceAll(s, sec, Redacted), true
		}
	}
	return s, changed
}

// redactAttr is the handlers' ReplaceAttr. The message and every attribute
// pass through it (members of groups one by one), their values resolved.
func redactAttr(a slog.Attr, secrets []string) slog.Attr {
	if len(secrets) == 0 {
		return a
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s, ok := redact(a.Value.String(), secrets); ok {
			a.Value = slog.StringValue(s)
		}
	case slog.KindAny:
		// Errors, structs, slices: judged by how the handler would print them.
		if s, ok := redact(fmt.Sprint(a.Value.Any()), secrets); ok {
			a.Value = slog.StringValue(s)
		}
	}
	return a
}
