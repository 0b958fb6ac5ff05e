package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// The first decision of a request stands; a start expires what waited;
// a group's allowances go with its registration.
func TestApprovalsAndAllowances(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
		for _, id := range []string{"a", "b"} {
			require.NoError(t, s.AddApproval(ctx, Approval{ID: id, Group: "family", Run: "r", Subject: "egress x:443", Asked: at}))
		}
		require.NoError(t, s.SetApprovalMessage(ctx, "a", 42, 7))
		ok, err := s.DecideApproval(ctx, "a", "deny", 42, at)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = s.DecideApproval(ctx, "a", "allow once", 42, at)
		require.NoError(t, err)
		assert.False(t, ok, "decided already")
		left, err := s.ExpireApprovals(ctx, "expired", at)
		require.NoError(t, err)
		require.Len(t, left, 1)
		assert.Equal(t, "b", left[0].ID)
		a, found, err := s.ApprovalByID(ctx, "a")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, Approval{ID: "a", Group: "family", Run: "r", Subject: "egress x:443", ChatID: 42, MessageID: 7, Asked: at, Decision: "deny", DecidedBy: 42, Decided: at}, a)
		b, _, err := s.ApprovalByID(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, "expired", b.Decision)

		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -1, Folder: "family", Name: "f"}))
		require.NoError(t, s.AllowEgress(ctx, EgressAllowance{Group: "family", Host: "x.org", Port: 443, AllowedBy: 42, Allowed: at}))
		_, ok, err = s.EgressAllowed(ctx, "family", "x.org", 443)
		require.NoError(t, err)
		assert.True(t, ok)
		_, err = s.DeleteGroup(ctx, "family")
		require.NoError(t, err)
		all, err := s.ListEgressAllowed(ctx, "")
		require.NoError(t, err)
		assert.Empty(t, all, "unregistered, its allowances are gone")
	})
}

// A member is told of the rate once an hour; busy senders are counted by
// their triggered messages only.
func TestRateNoticesAndBusySenders(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
		for i, claim := range []struct {
			now  time.Time
			want bool
		}{{at, true}, {at.Add(time.Minute), false}, {at.Add(59 * time.Minute), false}, {at.Add(61 * time.Minute), true}} {
			got, err := s.ClaimRateNotice(ctx, -1, 7, claim.now, claim.now.Add(-time.Hour))
			require.NoError(t, err)
			assert.Equal(t, claim.want, got, "claim %d", i)
		}
		for i := range 3 {
			_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: int64(i + 1), SenderID: 7, Text: "x", Time: at.Add(time.Duration(i) * time.Minute), Triggered: i < 2})
			require.NoError(t, err)
		}
		n, err := s.SenderCalls(ctx, -1, 7, at.Add(-time.Second))
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		busy, err := s.BusySenders(ctx, at.Add(-time.Second), 2)
		require.NoError(t, err)
		assert.Equal(t, []SenderCount{{ChatID: -1, Sender: 7, Calls: 2, First: at}}, busy)
		busy, err = s.BusySenders(ctx, at.Add(-time.Second), 3)
		require.NoError(t, err)
		assert.Empty(t, busy)
	})
}
