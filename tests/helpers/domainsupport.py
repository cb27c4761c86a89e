"""Helpers of the domain tests: the configuration they run under and publishing records."""

from __future__ import annotations

from mailsvc.config import Config, load

MX_HOST = "mx.sender.example.net"
SPF_INCLUDE = "spf.sender.example.net"


def domain_config(dns_server, cloudflare_url: str = "http://127.0.0.1:9/client/v4") -> Config:
    """Defaults, with every lookup going to the test DNS server and fixed mail host names."""
    config = load(None, environ={
        "MAILSVC_MAIL_HOSTNAME": MX_HOST,
        "MAILSVC_MAIL_SPF_INCLUDE": SPF_INCLUDE,
        "MAILSVC_DOMAINS_CLOUDFLARE_BASE_URL": cloudflare_url,
    })
    return dns_server.configure(config)


def publish(dns_server, domain: dict, *, skip: tuple[str, ...] = ()) -> None:
    """Serve the records a domain response lists (minus names/types in ``skip``)."""
    for record in domain["records"]:
        if record["name"] in skip or f"{record['name']}/{record['type']}" in skip:
            continue
        name = f"{record['name']}.{domain['name']}"
        if record["type"] == "TXT":
            dns_server.txt(name, record["value"])
        else:
            dns_server.mx(name, record["value"], record["priority"])

