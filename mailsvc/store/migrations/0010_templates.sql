-- Templates: a template row holds the draft that PATCH edits; each publish copies
-- the draft into an immutable row of template_versions and points current_version_id at it.
-- Sends use the published version only. A version's variables are part of its content and
-- live with it (jsonb: [{id, key, type, fallback_value, created_at, updated_at}]), so that a
-- version is one row written once. Aliases are unique per account, not globally.

CREATE TABLE templates (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    alias              text,
    name               text NOT NULL,
    -- The draft.
    sender             text,
    subject            text,
    reply_to           text[] NOT NULL DEFAULT '{}',
    html               text NOT NULL,
    text               text,                 -- NULL: generated from the html at send time
    builder            jsonb,                -- a builder document, when made from one
    variables          jsonb NOT NULL DEFAULT '[]',
    current_version_id uuid,
    published_at       timestamptz,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX templates_alias ON templates (tenant_id, alias) WHERE alias IS NOT NULL;
CREATE INDEX templates_tenant ON templates (tenant_id, id DESC);

CREATE TABLE template_versions (
    id          uuid PRIMARY KEY,
    template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    sender      text,
    subject     text,
    reply_to    text[] NOT NULL DEFAULT '{}',
    html        text NOT NULL,
    text        text,
    builder     jsonb,
    variables   jsonb NOT NULL DEFAULT '[]',
    created_at  timestamptz NOT NULL
);
CREATE INDEX template_versions_template ON template_versions (template_id);

ALTER TABLE templates ADD CONSTRAINT templates_current_version
    FOREIGN KEY (current_version_id) REFERENCES template_versions (id) DEFERRABLE INITIALLY DEFERRED;
