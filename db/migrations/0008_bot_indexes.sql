-- version 8: the bot's per-poll lookups: a series' messages by series key, stored series by sender
-- (supersede checks only look at the senders of the messages being assembled).

CREATE INDEX bot_messages_series ON bot_messages(series_key);
CREATE INDEX bot_series_sender ON bot_series(sender);
