-- Nothing reads them: agent sessions resume from the transcript in the
-- group's session directory, and the bot's own messages are never stored.
DROP TABLE sessions;
ALTER TABLE messages DROP COLUMN from_bot;
