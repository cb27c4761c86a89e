-- Template builder: each account's saved theme and brand profile, and which
-- template drafts hold the renderer's output of their builder document (re-rendered when the
-- account's theme changes; published versions keep their bytes).

CREATE TABLE builder_profiles (
    tenant_id  uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    theme      jsonb,                 -- NULL: never saved (the default theme is used)
    brand      jsonb,                 -- NULL: never saved
    updated_at timestamptz NOT NULL
);

-- True when the draft's html and text are the renderer's output of its builder document
-- (false when the write that set the document gave its own html or text).
ALTER TABLE templates ADD COLUMN builder_rendered boolean NOT NULL DEFAULT false;
UPDATE templates SET builder_rendered = true WHERE builder IS NOT NULL;
CREATE INDEX templates_builder_rendered ON templates (tenant_id) WHERE builder_rendered;
