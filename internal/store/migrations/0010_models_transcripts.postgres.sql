-- 0010 in PostgreSQL (see 0010_models_transcripts.sqlite.sql).
CREATE TABLE model_usage (
    group_folder  TEXT   NOT NULL,
    day           TEXT   NOT NULL,
    model         TEXT   NOT NULL,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    requests      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day, model)
);
CREATE INDEX model_usage_day ON model_usage (day);

CREATE TABLE transcribe_usage (
    group_folder TEXT   NOT NULL,
    day          TEXT   NOT NULL,
    seconds      BIGINT NOT NULL DEFAULT 0,
    files        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day)
);
CREATE INDEX transcribe_usage_day ON transcribe_usage (day);
