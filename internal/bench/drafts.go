package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/faketg"
)

// Row and target of the drafts section.
const (
	rowDraftFirst     = "model's first streamed token → first draft call"
	draftFirstTarget  = 50 * time.Millisecond
	draftAnswerLength = 160 // characters: five chunks of the fake model's stream
)

// liveDrafts measures how soon the owner sees an answer start: from the
// moment the fake model flushed the first text chunk of its stream to the
// moment the fake Telegram received the first sendMessageDraft, through the
// real `clawpen serve`, a real bwrap sandbox running clawpen-agent, the host
// socket's proxy and the router's draft.
func liveDrafts(ctx context.Context, o Options) Section {
	sec := Section{Name: "live drafts"}
	if o.HostBin == "" || o.AgentBin == "" {
		sec.Skipped = "HostBin or AgentBin not set"
		return sec
	}
	n := 30
	if o.Quick {
		n = 5
	}
	if o.Runs > 0 {
		n = o.Runs
	}
	o.progress("bench: live drafts, %d answers streamed slowly to the owner's chat", n)
	h, err := newServeHost(ctx, o, 0, map[string]string{"CLAWPEN_AGENT_TIMEOUT": "30s"})
	if err != nil {
		return failed(sec, err)
	}
	defer h.Close()
	first := make(chan time.Time, 1)
	h.f.LLM.OnFirstText(func(at time.Time) {
		select {
		case first <- at:
		default:
		}
	})
	p, _, err := h.start(ctx)
	if err != nil {
		return failed(sec, err)
	}
	defer p.stop()

	owner := faketg.User{ID: ownerID, FirstName: "owner"}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// A pause between chunks longer than the draft's pacing, so the first
	// draft is the first chunk's.
	answer := longAnswer(draftAnswerLength)
	var lat []time.Duration
	for i := range n {
		select {
		case <-first: // a stale stamp, if any
		default:
		}
		drafts := len(h.f.TG.Drafts(ownerID))
		h.f.TG.PushMessage(ownerID, "private", "", owner, fmt.Sprintf("DRIP 400ms REPLY %s %d", answer, i))
		got, err := h.f.TG.WaitDrafts(wctx, ownerID, drafts+1)
		if err != nil {
			return failed(sec, fmt.Errorf("draft %d: %w\n%s", i, err, p.logs.tail()))
		}
		var at time.Time
		select {
		case at = <-first:
		case <-wctx.Done():
			return failed(sec, fmt.Errorf("draft %d: the model's first token was not seen", i))
		}
		lat = append(lat, got[drafts].Time.Sub(at))
		if _, err := h.f.TG.WaitSent(wctx, ownerID, i+1); err != nil {
			return failed(sec, fmt.Errorf("answer %d: %w\n%s", i, err, p.logs.tail()))
		}
	}
	row := Latency(rowDraftFirst, lat)
	sec.Rows = append(sec.Rows, row.WithTarget(fmt.Sprintf("p50 ≤ %d ms", draftFirstTarget.Milliseconds()), row.P50 <= ms(draftFirstTarget)))
	sec.Notes = append(sec.Notes, fmt.Sprintf("%d answers of %d characters, each in the owner's chat, the fake model pausing 400 ms between 32-byte chunks; from the fake model's flush of the first text chunk to the fake Telegram's receipt of the first sendMessageDraft: the host's model proxy, the SDK's stream in the sandbox, the agent's progress line, the runner, the router's draft and the Bot API call", n, draftAnswerLength))
	return sec
}

// longAnswer is n characters of plain words.
func longAnswer(n int) string {
	const words = "the answer is being written word by word "
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, words...)
	}
	return string(b[:n])
}
