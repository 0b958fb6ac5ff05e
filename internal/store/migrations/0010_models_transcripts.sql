-- Model tokens per group, day and model: the same answers token_usage
-- counts (and budgets read), split by the model the proxy pinned for the
-- run (a profile's "model", else CLAWPEN_MODEL).
CREATE TABLE model_usage (
    group_folder  TEXT    NOT NULL,
    day           TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    requests      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day, model)
) WITHOUT ROWID;
CREATE INDEX model_usage_day ON model_usage (day);

-- Seconds of voice notes, audio and video notes the host had transcribed,
-- per group and day (TZ, YYYY-MM-DD): what the transcription provider
-- bills, and what a group's daily transcription limit counts.
CREATE TABLE transcribe_usage (
    group_folder TEXT    NOT NULL,
    day          TEXT    NOT NULL,
    seconds      INTEGER NOT NULL DEFAULT 0,
    files        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_folder, day)
) WITHOUT ROWID;
CREATE INDEX transcribe_usage_day ON transcribe_usage (day);
