-- A file a message carried that the host has yet to fetch: its Telegram
-- file id, '' once fetched or given up. The message is stored at once and
-- the file fetched beside the update loop (a large download no longer holds
-- every other chat's messages back); the group's run waits for it, and a
-- restart fetches what a crash left unfetched.
ALTER TABLE messages ADD COLUMN fetch TEXT NOT NULL DEFAULT '';
CREATE INDEX messages_fetch ON messages (seq) WHERE fetch != '';
