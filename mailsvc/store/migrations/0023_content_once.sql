-- An e-mail's content is stored once. Mail submitted through the API keeps its
-- subject, html, text, custom headers (new column) and attachment rows, and its message is
-- built again, byte for byte the same, whenever it is delivered or shown (docs/decisions.md,
-- "Content stored once"); `message` is written only for a message submitted over SMTP, whose
-- raw bytes are the truth. The broadcast stream's per-recipient messages are no longer stored
-- (`deliveries.message` stays NULL): each is built at delivery with its unsubscribe link, which
-- points at `links_base`. Rows written before keep their stored messages and go out as they are.
-- (Dropping NOT NULL and adding nullable columns rewrites no row.)
ALTER TABLE emails ALTER COLUMN message DROP NOT NULL;
ALTER TABLE emails ADD COLUMN headers jsonb;      -- [[name, value], ...] as submitted; NULL: none
ALTER TABLE emails ADD COLUMN links_base text;    -- broadcast stream: scheme://host of the unsubscribe links

-- A broadcast's recipient is a row, not a stored message: its e-mail names the broadcast
-- (`broadcast_id`; no foreign key: a deleted broadcast's e-mails stay) and stores neither html
-- nor text; its recipient row keeps the contact fields the content's placeholders use, as they
-- were at fan-out (`snapshot`). The message is built from the broadcast's content and that
-- snapshot when delivered; the broadcast cannot be deleted while any of it is still queued.
ALTER TABLE emails ADD COLUMN broadcast_id uuid;
ALTER TABLE broadcast_recipients ADD COLUMN snapshot jsonb;
