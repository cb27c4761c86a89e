-- Deliverability beyond the peers: MTA-STS policies, TLS reporting counts,
-- adaptive per-destination shaping, DMARC aggregate reports.

-- MTA-STS policies (RFC 8461) of recipient domains, shared by every delivery node: kept by
-- their id until max_age ends (a policy is refreshed when the _mta-sts TXT id changes).
CREATE TABLE mta_sts_policies (
    domain     text PRIMARY KEY,
    policy_id  text NOT NULL,
    mode       text NOT NULL CHECK (mode IN ('enforce', 'testing', 'none')),
    mx         text[] NOT NULL,
    max_age    integer NOT NULL,
    fetched_at double precision NOT NULL,   -- seconds since the epoch
    expires_at double precision NOT NULL
);

-- TLS reporting (RFC 8460): sessions under a policy per recipient domain and UTC day, by
-- policy type, MX host and result ('success' or an RFC 8460 result type); sent once a day.
CREATE TABLE tls_report_counts (
    domain      text NOT NULL,
    day         date NOT NULL,
    policy_type text NOT NULL,              -- sts | tlsa | no-policy-found
    policy      text NOT NULL DEFAULT '',   -- the policy strings, newline-separated
    mx_host     text NOT NULL,
    result      text NOT NULL,
    count       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (domain, day, policy_type, mx_host, result)
);
CREATE TABLE tls_reports_sent (
    domain  text NOT NULL,
    day     date NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT now(),
    outcome text NOT NULL,
    PRIMARY KEY (domain, day)
);

-- Adaptive shaping: the starting limits of known destinations (the operator edits them
-- through /admin/v1/destinations), matched by the MX host's name or a suffix of it.
CREATE TABLE destination_defaults (
    pattern      text PRIMARY KEY,          -- "google.com" matches aspmx.l.google.com
    concurrency  integer NOT NULL CHECK (concurrency >= 1),
    rate_per_sec double precision NOT NULL CHECK (rate_per_sec > 0)
);
INSERT INTO destination_defaults (pattern, concurrency, rate_per_sec) VALUES
    ('google.com', 10, 20),
    ('googlemail.com', 10, 20),
    ('outlook.com', 8, 10),
    ('protection.outlook.com', 8, 10),
    ('hotmail.com', 8, 10),
    ('yahoodns.net', 5, 5),
    ('yahoo.com', 5, 5);

-- The current limits of each destination (an MX host's registered domain) for a source (the
-- node's outgoing IP class; "default" while every node sends from its own address), shrunk
-- on 421 / 4.7.x and grown back slowly on success, shared by every delivery node.
CREATE TABLE destination_limits (
    source       text NOT NULL,
    destination  text NOT NULL,
    concurrency  integer NOT NULL,
    rate_per_sec double precision NOT NULL,
    throttled_at double precision,          -- the last shrink (seconds since the epoch)
    changed_at   double precision NOT NULL,
    PRIMARY KEY (source, destination)
);

-- DMARC aggregate reports (RFC 7489 §7.2) that receivers sent to the rua of our suggested
-- record, per sending domain; one row per report and one per <record>.
CREATE TABLE dmarc_reports (
    id          uuid PRIMARY KEY,
    domain_id   uuid NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
    org_name    text NOT NULL,
    report_id   text NOT NULL,
    begin_at    timestamptz NOT NULL,
    end_at      timestamptz NOT NULL,
    policy      text NOT NULL DEFAULT '',
    received_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (domain_id, org_name, report_id)
);
CREATE TABLE dmarc_records (
    report_id     uuid NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
    day           date NOT NULL,
    source_ip     text NOT NULL,
    count         integer NOT NULL,
    disposition   text NOT NULL,
    dkim_aligned  boolean NOT NULL,
    spf_aligned   boolean NOT NULL,
    header_from   text NOT NULL
);
CREATE INDEX dmarc_records_report ON dmarc_records (report_id);
