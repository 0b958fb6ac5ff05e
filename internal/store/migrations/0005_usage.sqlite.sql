-- Model tokens per group and day. day is the date in the host's time zone
-- (TZ) as YYYY-MM-DD, so it sorts in time order; an answer's tokens go to
-- the day it ended.
CREATE TABLE token_usage (
    group_folder  TEXT    NOT NULL,
    day           TEXT    NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0, -- cache reads and writes included
    output_tokens INTEGER NOT NULL DEFAULT 0,
    requests      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day)
) WITHOUT ROWID;
CREATE INDEX token_usage_day ON token_usage (day);

-- The chat of a group over its daily token budget is told once a day: a
-- row here says it was, so a restart does not tell it again.
CREATE TABLE budget_notices (
    group_folder TEXT    NOT NULL,
    day          TEXT    NOT NULL,
    told_at      INTEGER NOT NULL,
    PRIMARY KEY (group_folder, day)
) WITHOUT ROWID;
