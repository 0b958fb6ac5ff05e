-- 0008 in PostgreSQL (see 0008_fetch.sqlite.sql): FETCH is a reserved word
-- there, so the column is quoted (the store's queries quote it for both).
ALTER TABLE messages ADD COLUMN "fetch" TEXT NOT NULL DEFAULT '';
CREATE INDEX messages_fetch ON messages (seq) WHERE "fetch" != '';
