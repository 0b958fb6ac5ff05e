package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// A file row is a row of the outbox like any other; its bytes are read
// apart and leave with it.
func TestEnqueueFileSentOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		o, err := s.EnqueueFile(ctx, domain.Outgoing{ChatID: -5, Text: "caption", Kind: domain.OutPhoto, FileName: "a.png"}, []byte("bytes"))
		require.NoError(t, err)
		pending, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, o, pending[0])
		data, err := s.OutboxFile(ctx, o.ID)
		require.NoError(t, err)
		assert.Equal(t, "bytes", string(data))

		require.NoError(t, s.MarkSent(ctx, o.ID))
		_, err = s.OutboxFile(ctx, o.ID)
		assert.ErrorContains(t, err, "has no file", "the bytes left with the row")
		var n int
		require.NoError(t, s.r.QueryRow(`SELECT COUNT(*) FROM outbox_files`).Scan(&n))
		assert.Zero(t, n)

		_, err = s.EnqueueFile(ctx, domain.Outgoing{ChatID: -5, Kind: "exe"}, nil)
		assert.ErrorContains(t, err, "unknown kind")
		_, err = s.EnqueueFile(ctx, domain.Outgoing{Kind: domain.OutDocument}, nil)
		assert.ErrorContains(t, err, "zero chat id")
	})
}

func TestMessageAttachmentRoundTrip(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		a := &domain.Attachment{Type: "document", Path: "/workspace/group/inbox/x.pdf", Name: "../../.env"}
		_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 1, Text: "", Attachment: a})
		require.NoError(t, err)
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 2, Text: "plain"})
		require.NoError(t, err)
		ms, err := s.MessagesAfter(ctx, -5, 0, 0)
		require.NoError(t, err)
		require.Len(t, ms, 2)
		assert.Equal(t, a, ms[0].Attachment)
		assert.Nil(t, ms[1].Attachment)
	})
}

// A message whose file is still to be fetched is listed until what became
// of the file is recorded; its attachment then says so.
func TestFileToFetch(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		waiting := &domain.Attachment{Type: "document", Path: "/workspace/group/inbox/a.pdf", Note: "being fetched"}
		seq, _, err := s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 1, Text: "a", Attachment: waiting, FileToFetch: "f1"})
		require.NoError(t, err)
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 2, Text: "b"})
		require.NoError(t, err)

		left, err := s.MessagesToFetch(ctx)
		require.NoError(t, err)
		require.Len(t, left, 1)
		assert.Equal(t, "f1", left[0].FileToFetch)
		assert.Equal(t, waiting, left[0].Attachment)

		fetched := &domain.Attachment{Type: "document", Path: "/workspace/group/inbox/a.pdf"}
		require.NoError(t, s.SetFetched(ctx, seq, fetched))
		left, err = s.MessagesToFetch(ctx)
		require.NoError(t, err)
		assert.Empty(t, left)
		msgs, err := s.MessagesAfter(ctx, -5, 0, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		assert.Empty(t, msgs[0].FileToFetch)
		assert.Equal(t, fetched, msgs[0].Attachment)
	})
}
