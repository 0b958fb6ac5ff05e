package escape

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

func init() { register(usageAttacks) }

// usageAttacks try to have the model answer without the answer counting
// against the group's tokens.
func usageAttacks() []attack {
	const n, in, out = 5, 20_000, 3_000
	return []attack{
		// Streamed answers hung up on after their first text, in both APIs:
		// the provider bills each in full, so the host must count it.
		{name: "model-hangup-uncharged", msg: func(e *env) string {
			return bash(fmt.Sprintf("./pwn model-hangup -n %d -in %d -out %d; echo HANGUP-DONE", n, in, out), 90)
		}, want: []string{"HANGUP-DONE", fmt.Sprintf("HANGUP-anthropic=%d", n), fmt.Sprintf("HANGUP-openai=%d", n)},
			check: func(t *testing.T, e *env, _ string) []string {
				// Beside the agent's own few small answers.
				want := domain.Usage{Input: 2 * n * in, Output: 2 * n * out, Requests: 2 * n}
				var u domain.Usage
				charged := func() bool {
					u = e.h.Usage(e.folder)
					return u.Input >= want.Input && u.Output >= want.Output && u.Requests >= want.Requests
				}
				// Recorded when each answer has been read to its end, which
				// may be after the chat got the agent's.
				ok := assert.Eventually(t, charged, 60*time.Second, 50*time.Millisecond)
				t.Logf("charged %d in, %d out in %d answers", u.Input, u.Output, u.Requests)
				if !ok {
					return []string{fmt.Sprintf("charged %d in, %d out in %d answers for %d answers hung up on, billed %d in, %d out",
						u.Input, u.Output, u.Requests, want.Requests, want.Input, want.Output)}
				}
				return nil
			}},
	}
}
