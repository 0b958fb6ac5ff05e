-- Files an agent sends (send_file). An outbox row with a file is one
-- Telegram message like any other: kind says how it is sent ('' text,
-- 'photo', 'document'), file_name what the chat sees, text the caption.
-- The bytes were copied from the group's folder when the agent asked, so
-- what is sent is what it pointed at then; they live in outbox_files,
-- apart from the row, so reading the pending outbox never loads them.
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN file_name TEXT NOT NULL DEFAULT '';

CREATE TABLE outbox_files (
    outbox_id INTEGER PRIMARY KEY REFERENCES outbox (id) ON DELETE CASCADE,
    data      BLOB    NOT NULL
);

-- A file a message carried (a photo, a document, a voice note …), as JSON
-- (domain.Attachment): where the host put it in the group's folder, or why
-- it did not (too large, not downloadable). '' is none.
ALTER TABLE messages ADD COLUMN attachment TEXT NOT NULL DEFAULT '';
