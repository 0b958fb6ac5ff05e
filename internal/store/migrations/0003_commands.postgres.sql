-- 0003 in PostgreSQL (see 0003_commands.sqlite.sql).
CREATE TABLE handled_commands (
    chat_id    BIGINT NOT NULL,
    message_id BIGINT NOT NULL,
    handled_at BIGINT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
