package app

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/transcribe"
)

// transcriber is the host's transcriber as cfg sets it; nil when off.
func transcriber(cfg config.Config) router.Transcriber {
	switch cfg.Transcribe {
	case config.TranscribeOpenAI:
		return transcribe.OpenAI{URL: cfg.TranscribeURL, Key: cfg.TranscribeKey, Model: cfg.TranscribeModel, Timeout: cfg.TranscribeTimeout}
	case config.TranscribeCommand:
		return transcribe.Command{Argv: cfg.TranscribeCmd, Timeout: cfg.TranscribeTimeout, Getenv: cfg.HostEnv}
	}
	return nil
}

// transcriberFinding says how voice notes become text: off, the server
// (asked for its models with the key, as the provider is), or the local
// program (found on PATH). The key itself is never shown.
func transcriberFinding(ctx context.Context, cfg config.Config, hc *http.Client) Finding {
	f := Finding{Name: "transcribe", Verdict: OK}
	limit := "no daily limit"
	if cfg.TranscribeDailySeconds > 0 {
		limit = fmt.Sprintf("at most %d minutes a day per group but main", cfg.TranscribeDailySeconds/60)
	}
	switch cfg.Transcribe {
	case config.TranscribeOpenAI:
		key := "no key"
		switch {
		case cfg.TranscribeKey == "":
		case cfg.HostEnv("CLAWPEN_TRANSCRIBE_KEY") != "":
			key = "the key in CLAWPEN_TRANSCRIBE_KEY"
		default:
			key = "the key in OPENAI_API_KEY"
		}
		f.Detail = fmt.Sprintf("%s/v1/audio/transcriptions, model %s, %s, %s", cfg.TranscribeURL, cfg.TranscribeModel, key, limit)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.TranscribeURL+"/v1/models", nil)
		if err != nil {
			f.Verdict, f.Fix = Fail, "set CLAWPEN_TRANSCRIBE_URL to the server's base URL, without /v1"
			return f
		}
		if cfg.TranscribeKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.TranscribeKey)
		}
		resp, err := hc.Do(req)
		if err != nil {
			f.Verdict, f.Detail = Fail, fmt.Sprintf("the transcription server at %s is not reachable: %v", cfg.TranscribeURL, err)
			f.Fix = "check CLAWPEN_TRANSCRIBE_URL, or CLAWPEN_TRANSCRIBE=off"
			return f
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			f.Verdict, f.Detail = Fail, "the key is refused by the transcription server: "+f.Detail
			f.Fix = "check CLAWPEN_TRANSCRIBE_KEY (or OPENAI_API_KEY)"
		case resp.StatusCode >= 300:
			f.Verdict, f.Detail = Warn, fmt.Sprintf("%s; listing its models answered %s", f.Detail, resp.Status)
		}
	case config.TranscribeCommand:
		f.Detail = fmt.Sprintf("the command %s, at most %s each, %s", strings.Join(cfg.TranscribeCmd, " "), cfg.TranscribeTimeout, limit)
		if _, err := exec.LookPath(cfg.TranscribeCmd[0]); err != nil {
			f.Verdict, f.Detail = Fail, fmt.Sprintf("%s: %v", f.Detail, err)
			f.Fix = "install the program, or set CLAWPEN_TRANSCRIBE_CMD to its full path"
		}
	default:
		f.Detail = "off: voice notes reach the agent as files"
		f.Fix = ""
	}
	return f
}
