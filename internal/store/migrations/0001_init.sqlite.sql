-- 0001: initial schema. Times are INTEGER unix milliseconds UTC; 0 (or NULL
-- where a range query must skip the row) means "no time".

-- Every chat the bot has seen, registered or not: metadata only.
CREATE TABLE chats (
    id        INTEGER PRIMARY KEY,
    title     TEXT    NOT NULL DEFAULT '',
    type      TEXT    NOT NULL DEFAULT '',
    last_seen INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX chats_last_seen ON chats (last_seen);

-- Messages of registered groups. seq is AUTOINCREMENT so it never reuses a
-- value, even after deletes: cursors compare seqs.
CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    thread_id   INTEGER NOT NULL DEFAULT 0,
    sender_id   INTEGER NOT NULL DEFAULT 0,
    sender_name TEXT    NOT NULL DEFAULT '',
    text        TEXT    NOT NULL DEFAULT '',
    time        INTEGER NOT NULL DEFAULT 0,
    from_bot    INTEGER NOT NULL DEFAULT 0,
    triggered   INTEGER NOT NULL DEFAULT 0, -- called the agent when it arrived
    UNIQUE (chat_id, message_id)
);
CREATE INDEX messages_chat_seq ON messages (chat_id, seq);

-- Registered groups; the folder is the identity, the chat id is unique too.
CREATE TABLE "groups" (
    folder       TEXT    PRIMARY KEY,
    chat_id      INTEGER NOT NULL UNIQUE,
    name         TEXT    NOT NULL DEFAULT '',
    trigger_word TEXT    NOT NULL DEFAULT '',
    profile      TEXT    NOT NULL DEFAULT '',
    mounts       TEXT    NOT NULL DEFAULT 'null', -- JSON []domain.MountRequest
    policy       TEXT,                            -- raw JSON, NULL when none
    added        INTEGER NOT NULL DEFAULT 0
);

-- Per-folder cursor: seq of the last message handled by a successful run.
-- Keyed by folder (not chat id) so a supergroup migration leaves it intact.
CREATE TABLE cursors (
    folder TEXT    PRIMARY KEY,
    seq    INTEGER NOT NULL DEFAULT 0
);

-- Agent session id per group folder.
CREATE TABLE sessions (
    folder     TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL,
    updated    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE tasks (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    group_folder   TEXT    NOT NULL,
    chat_id        INTEGER NOT NULL DEFAULT 0,
    prompt         TEXT    NOT NULL,
    schedule_type  TEXT    NOT NULL,
    schedule_value TEXT    NOT NULL,
    context_mode   TEXT    NOT NULL DEFAULT 'group',
    status         TEXT    NOT NULL DEFAULT 'active',
    next_run       INTEGER,          -- NULL: not scheduled
    last_run       INTEGER NOT NULL DEFAULT 0,
    created        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_next_run ON tasks (next_run);
CREATE INDEX tasks_group ON tasks (group_folder);

CREATE TABLE task_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    started     INTEGER NOT NULL DEFAULT 0,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    status      TEXT    NOT NULL,
    result      TEXT    NOT NULL DEFAULT '',
    error       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX task_runs_task ON task_runs (task_id, id);

-- Generic key/value state of the router (update offset, owner id, ...).
CREATE TABLE router_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE audit_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    time         INTEGER NOT NULL,
    group_folder TEXT    NOT NULL DEFAULT '',
    operation    TEXT    NOT NULL,
    decision     TEXT    NOT NULL,
    reason       TEXT    NOT NULL DEFAULT ''
);

-- Answers committed by a successful run and not yet delivered. A row is
-- deleted once Telegram accepted it.
CREATE TABLE outbox (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id   INTEGER NOT NULL,
    thread_id INTEGER NOT NULL DEFAULT 0,
    text      TEXT    NOT NULL,
    created   INTEGER NOT NULL DEFAULT 0
);
