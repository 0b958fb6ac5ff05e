-- 0005 in PostgreSQL (see 0005_usage.sqlite.sql).
CREATE TABLE token_usage (
    group_folder  TEXT   NOT NULL,
    day           TEXT   NOT NULL,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    requests      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day)
);
CREATE INDEX token_usage_day ON token_usage (day);

CREATE TABLE budget_notices (
    group_folder TEXT   NOT NULL,
    day          TEXT   NOT NULL,
    told_at      BIGINT NOT NULL,
    PRIMARY KEY (group_folder, day)
);
