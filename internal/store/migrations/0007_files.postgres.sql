-- 0007 in PostgreSQL (see 0007_files.sqlite.sql): the bytes are BYTEA.
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN file_name TEXT NOT NULL DEFAULT '';

CREATE TABLE outbox_files (
    outbox_id BIGINT PRIMARY KEY REFERENCES outbox (id) ON DELETE CASCADE,
    data      BYTEA  NOT NULL
);

ALTER TABLE messages ADD COLUMN attachment TEXT NOT NULL DEFAULT '';
