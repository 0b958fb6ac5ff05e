package app

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
)

type secretValuer struct{ s string }

func (v secretValuer) LogValue() slog.Value { return slog.StringValue("value " + v.s) }

func TestLoggerNeverWritesSecrets(t *testing.T) {
	const token = "123456:AAHsecretsecretsecret"
	const anthropic = "sk-ant-api03-verysecret"
	const openai = "sk-openai-alsosecret"
	const dbPassword = "db-password-secret"
	const dbURL = "postgres://clawpen:" + dbPassword + "@db:5432/clawpen"
	cfg := config.Config{TelegramToken: token, AnthropicKey: anthropic, OpenAIKey: openai, DatabaseURL: dbURL}
	for _, format := range []string{"text", "json"} {
		for _, tc := range []struct {
			name string
			log  func(l *slog.Logger)
		}{
			{"message", func(l *slog.Logger) { l.Info("calling https://api.telegram.org/bot" + token + "/getMe") }},
			{"string attr", func(l *slog.Logger) { l.Info("x", "key", anthropic) }},
			{"error attr", func(l *slog.Logger) {
				l.Error("x", "err", errors.New(`Post "https://api.telegram.org/bot`+token+`/sendMessage": EOF`))
			}},
			{"group", func(l *slog.Logger) { l.Info("x", slog.Group("provider", "key", openai)) }},
			{"logger attrs", func(l *slog.Logger) { l.With("auth", "Bearer "+openai).Info("x") }},
			{"LogValuer", func(l *slog.Logger) { l.Info("x", "v", secretValuer{anthropic}) }},
			{"slice", func(l *slog.Logger) { l.Info("x", "args", []string{"--key", anthropic}) }},
			{"token's secret part alone", func(l *slog.Logger) { l.Info("x", "s", "AAHsecretsecretsecret") }},
			{"debug level", func(l *slog.Logger) { l.Debug("x", "token", token) }},
			{"database URL", func(l *slog.Logger) { l.Error("x", "err", errors.New("connect "+dbURL+": refused")) }},
			{"database password alone", func(l *slog.Logger) { l.Info("x", "pw", dbPassword) }},
		} {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				cfg.LogFormat = format
				tc.log(NewLogger(&buf, cfg, slog.LevelDebug))
				out := buf.String()
				require.NotEmpty(t, out)
				for _, s := range []string{token, "AAHsecretsecretsecret", anthropic, openai, dbPassword} {
					assert.NotContains(t, out, s)
				}
				assert.Contains(t, out, Redacted)
				if format == "json" {
					assert.Equal(t, byte('{'), out[0], "JSON handler: %s", out)
				}
			})
		}
	}
}

func TestLoggerKeepsShortValues(t *testing.T) {
	// A key too short to be real must not blank its letters everywhere.
	var buf bytes.Buffer
	NewLogger(&buf, config.Config{AnthropicKey: "a", LogFormat: "text"}, slog.LevelInfo).Info("a calm day")
	assert.Contains(t, buf.String(), "a calm day")
}
