-- version 6: the mailing-list bot. What it has read (so a restart reprocesses nothing), the
-- series it assembled from those messages, and what it decided and sent, so that each
-- (series version, finding set) gets its replies exactly once even across crashes.

CREATE TABLE bot_messages (
    message_id    TEXT PRIMARY KEY,            -- with <>; synthesized for a message without one
    source        TEXT NOT NULL,               -- the maildir / mbox path it was read from
    source_key    TEXT NOT NULL,               -- maildir key, or sha256 of the raw bytes for an mbox
    kind          TEXT NOT NULL,               -- patch | cover | reply | other | own | malformed
    subject       TEXT NOT NULL DEFAULT '',
    from_name     TEXT NOT NULL DEFAULT '',
    from_addr     TEXT NOT NULL DEFAULT '',
    recipients    TEXT NOT NULL DEFAULT '{}',  -- JSON {"to": [...], "cc": [...], "list_id": "..."}
    date          TEXT NOT NULL DEFAULT '',    -- the Date: header as sent
    in_reply_to   TEXT,
    refs          TEXT NOT NULL DEFAULT '[]',  -- JSON list of References: message-ids
    version       INTEGER,
    position      INTEGER,                     -- n of [PATCH n/m]; 0 for a cover letter
    total         INTEGER,
    tags          TEXT NOT NULL DEFAULT '{}',  -- JSON: base-commit, change-id
    note          TEXT NOT NULL DEFAULT '',    -- why it is malformed or ignored
    received_at   TEXT NOT NULL,               -- when the bot first read it (UTC, ISO 8601)
    raw_z         BLOB,                        -- patches and cover letters only, zlib
    series_key    TEXT                         -- the bot_series it was assembled into
);
CREATE INDEX bot_messages_source ON bot_messages(source, source_key);
CREATE INDEX bot_messages_open ON bot_messages(kind, series_key);

CREATE TABLE bot_series (
    key           TEXT PRIMARY KEY,            -- thread root | sender | vN
    version       INTEGER NOT NULL DEFAULT 1,
    subject       TEXT NOT NULL DEFAULT '',
    sender        TEXT NOT NULL DEFAULT '',
    total         INTEGER NOT NULL DEFAULT 0,
    state         TEXT NOT NULL,               -- waiting | tested | not_applied | incomplete | superseded
                                               -- | skipped (not watched) | error
    series_id     INTEGER REFERENCES series(id),   -- the pipeline's series row once applied
    superseded_by TEXT,
    note          TEXT NOT NULL DEFAULT '',
    first_seen    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX bot_series_state ON bot_series(state);

CREATE TABLE bot_decisions (
    id            INTEGER PRIMARY KEY,
    series_key    TEXT NOT NULL REFERENCES bot_series(key),
    finding_set   TEXT NOT NULL,               -- sha256 of the sorted reportable finding keys
    findings      TEXT NOT NULL DEFAULT '[]',  -- JSON: the reportable findings
    outcome       TEXT NOT NULL,               -- mail | quiet | opted_out
    decided_at    TEXT NOT NULL,
    UNIQUE (series_key, finding_set)
);

CREATE TABLE bot_mails (
    message_id    TEXT PRIMARY KEY,            -- stable: derived from the decision and the mail replied to
    decision_id   INTEGER NOT NULL REFERENCES bot_decisions(id),
    in_reply_to   TEXT NOT NULL,
    subject       TEXT NOT NULL DEFAULT '',
    recipients    TEXT NOT NULL DEFAULT '[]',  -- JSON list of envelope addresses
    raw_z         BLOB NOT NULL,               -- the whole message as it is (re)sent, zlib
    state         TEXT NOT NULL,               -- decided | held (daily cap) | sent | dropped (superseded)
    transport     TEXT NOT NULL DEFAULT '',    -- smtp host:port or outbox path it went to
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT NOT NULL DEFAULT '',
    decided_at    TEXT NOT NULL,
    sent_at       TEXT
);
CREATE INDEX bot_mails_state ON bot_mails(state);
CREATE INDEX bot_mails_sent ON bot_mails(sent_at);
CREATE INDEX bot_mails_decision ON bot_mails(decision_id);
