-- Admin commands handled, by the message that carried them: a command whose
-- update comes again after a crash (its offset was not yet saved) is not run
-- a second time.
CREATE TABLE handled_commands (
    chat_id    INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    handled_at INTEGER NOT NULL,
    PRIMARY KEY (chat_id, message_id)
) WITHOUT ROWID;
