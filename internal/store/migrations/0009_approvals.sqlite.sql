-- Requests that waited for the owner (DESIGN.md "Approvals"): one row per
-- request asked, the message that asked it in the owner's chat, and what
-- became of it. A tool's arguments are not kept, only their digest in
-- subject. A restart marks the rows still undecided expired and edits their
-- messages.
CREATE TABLE approvals (
    id           TEXT    PRIMARY KEY,       -- the request's random id (hex, 128 bits)
    group_folder TEXT    NOT NULL,
    run          TEXT    NOT NULL,          -- the agent run that asked
    subject      TEXT    NOT NULL,          -- what was asked, as the audit log says it
    chat_id      INTEGER NOT NULL DEFAULT 0,
    message_id   INTEGER NOT NULL DEFAULT 0,
    asked        INTEGER NOT NULL,
    decision     TEXT    NOT NULL DEFAULT '', -- '' while it waits
    decided_by   INTEGER NOT NULL DEFAULT 0,  -- the owner's user id when the owner decided
    decided      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX approvals_waiting ON approvals (asked) WHERE decision = '';

-- Egress destinations the owner allowed for a group ("Allow for <group>"),
-- until revoked; gone with the group's registration.
CREATE TABLE egress_allowed (
    group_folder TEXT    NOT NULL,
    host         TEXT    NOT NULL,
    port         INTEGER NOT NULL,
    allowed_by   INTEGER NOT NULL,
    allowed      INTEGER NOT NULL,
    PRIMARY KEY (group_folder, host, port)
);
CREATE TRIGGER egress_allowed_unregistered AFTER DELETE ON "groups" BEGIN
    DELETE FROM egress_allowed WHERE group_folder = OLD.folder;
END;

-- The per-sender rate (CLAWPEN_SENDER_RATE): a member's calls of the agent
-- in a group are its triggered messages; told is when the member was last
-- told of being over the rate (at most once an hour).
CREATE INDEX messages_sender_calls ON messages (chat_id, sender_id, time) WHERE triggered = 1;
CREATE TABLE rate_notices (
    chat_id   INTEGER NOT NULL,
    sender_id INTEGER NOT NULL,
    told      INTEGER NOT NULL,
    PRIMARY KEY (chat_id, sender_id)
);
