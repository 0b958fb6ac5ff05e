-- Triggered messages per chat, for finding the groups with unanswered
-- messages at start without reading every group's backlog.
CREATE INDEX messages_triggered ON messages (chat_id, seq) WHERE triggered = 1;

-- Each chat's sender reads only its own outbox rows.
CREATE INDEX outbox_chat ON outbox (chat_id, id);
