-- The dashboard's previews of HTML (docs/decisions.md, "Web UI for content"): kept in the
-- database so that any process of any node serves the frame that asks for one.
CREATE TABLE ui_previews (
    token       text PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    html        bytea NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX ui_previews_expiry ON ui_previews (expires_at);
CREATE INDEX ui_previews_tenant ON ui_previews (tenant_id, expires_at);
