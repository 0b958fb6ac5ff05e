package ops

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

// The metrics hear of every refusal an agent got, also past the audit
// budget, and of none that was allowed or was the owner's.
func TestRefusedHearsEveryAgentRefusal(t *testing.T) {
	h, _ := setup(t)
	var mu sync.Mutex
	heard := map[Op]int{}
	h.cfg.Refused = func(op Op) { mu.Lock(); heard[op]++; mu.Unlock() }
	ctx := context.Background()
	id := familyID
	id.Run = "r"
	const n = MaxAuditedRefusals + 5
	for range n {
		status, _ := h.Handle(ctx, id, "send_message", []byte(`{"text":"x","chat_id":42}`))
		assert.Equal(t, 403, status)
	}
	h.Handle(ctx, id, "no_such_op", nil)
	h.Handle(ctx, id, "send_message", []byte(`{"bogus":1}`))
	status, _ := h.Handle(ctx, id, "send_message", []byte(`{"text":"to my own chat"}`))
	assert.Equal(t, 200, status)
	h.Handle(ctx, domain.Owner(), "unregister_group", []byte(`{"folder":"nobody"}`))
	h.EndRun("r")
	assert.Equal(t, map[Op]int{SendMessage: n + 1, "no_such_op": 1}, heard)
}
