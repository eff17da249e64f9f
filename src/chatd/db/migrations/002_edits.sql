-- Message edits (CHATD.md 3, editMessage): an edit that arrives while a turn runs waits in the
-- queue, marked with the message it replaces, and takes effect when the interruption ends.
ALTER TABLE chat_queued_messages ADD COLUMN edit_of bigint;
