-- Contacts, segments and audiences. A contact belongs to an account and is unique
-- by its address in the suppression list's normal form (mailsvc.domain.suppression), so a
-- contact and its suppression record always meet on (tenant_id, email). `unsubscribed` is not
-- stored: it is whether that address is on the list, read with the contact, so the two can
-- never disagree (docs/decisions.md "Contacts, segments and audiences").

CREATE TABLE contacts (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email       text NOT NULL,
    first_name  text,
    last_name   text,
    properties  jsonb NOT NULL DEFAULT '{}',   -- {key: value}; each key's type is in contact_property_types
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
-- One index serves both the address's uniqueness (and every lookup by address: `=` is in
-- text_pattern_ops) and `q`'s prefix of the address (stored lower-cased), which the cluster's
-- C.UTF-8 collation would not give a default index: one index less to write per contact.
CREATE UNIQUE INDEX contacts_address ON contacts (tenant_id, email text_pattern_ops);
CREATE INDEX contacts_tenant ON contacts (tenant_id, id DESC);
-- `q`: a case-insensitive prefix of the first or last name too.
CREATE INDEX contacts_first_name_prefix ON contacts (tenant_id, lower(first_name) text_pattern_ops)
    WHERE first_name IS NOT NULL;
CREATE INDEX contacts_last_name_prefix ON contacts (tenant_id, lower(last_name) text_pattern_ops)
    WHERE last_name IS NOT NULL;

-- A property key keeps, for the whole account, the type of the first value it was given.
CREATE TABLE contact_property_types (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key       text NOT NULL,
    type      text NOT NULL CHECK (type IN ('string', 'number', 'boolean')),
    PRIMARY KEY (tenant_id, key)
);

-- Segments, which the legacy /audiences paths also show (same ids).
CREATE TABLE segments (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX segments_tenant ON segments (tenant_id, id DESC);

-- Membership: the primary key serves a segment's members newest contact first by keyset
-- (broadcasts read them in chunks this way); the second index a contact's segments.
CREATE TABLE segment_contacts (
    segment_id uuid NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    contact_id uuid NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (segment_id, contact_id)
);
CREATE INDEX segment_contacts_contact ON segment_contacts (contact_id, segment_id);
