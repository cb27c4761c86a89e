"""
Sending domains: which names may be added, the records a domain publishes, and how a DNS
check moves its status (not_started → pending → verified | failed). Pure: no I/O, time is a
number of seconds handed in.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any

import attrs
from publicsuffixlist import PublicSuffixList

from mailsvc.domain.addresses import ascii_domain
from mailsvc.domain.errors import Invalid

STATUSES = ("not_started", "pending", "verified", "failed")
TLS_POLICIES = ("opportunistic", "enforced")
DEFAULT_RETURN_PATH = "bounces"
MX_PRIORITY = 10
DMARC_SUGGESTED = "v=DMARC1; p=none;"
#: The local part of the return-path host's address that takes DMARC aggregate reports.
DMARC_REPORTS_LOCAL = "dmarc"


def dmarc_suggested(return_path_host: str) -> str:
    """The suggested policy: monitoring only, aggregate reports to our return-path host (the same
    organizational domain, so no external-destination record is needed, RFC 7489 §7.1)."""
    return f"{DMARC_SUGGESTED} rua=mailto:{DMARC_REPORTS_LOCAL}@{return_path_host};"
NAME_MAX = 253

#: Outcomes of looking one record up.
MATCH = "match"          # published as it should be
MISMATCH = "mismatch"    # absent or different (an authoritative answer)
TEMPORARY = "temporary"  # the lookup failed (timeout, SERVFAIL): says nothing

#: Seconds between checks of a pending domain: 30 s doubling up to an hour.
FIRST_RETRY = 30
MAX_RETRY = 3600
#: A verified domain whose records are missing is checked once more after this many seconds
#: before it fails: one odd answer from one name server must not stop a customer's mail.
CONFIRM_DELAY = 300
#: A verified domain whose lookups failed (no answer at all) is tried again after an hour.
VERIFIED_RETRY = 3600

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


@functools.cache
def _suffixes() -> PublicSuffixList:
    """The public suffix list bundled with the package (never fetched at run time)."""
    return PublicSuffixList(accept_unknown=False)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def domain_name(value: Any) -> str:
    """
    The name as stored: lower-case A-labels, no trailing dot, a host name strictly below a
    public suffix (ICANN or private section), not an address.
    """
    if value is None:
        raise Invalid("name", "name is required")
    if not isinstance(value, str) or not value.strip():
        raise Invalid("name", "name must be a non-empty string")
    text = value.strip()
    if _is_address(text):
        raise Invalid("name", "name must be a domain name, not an IP address")
    name = ascii_domain(text)
    if name is None:
        raise Invalid("name", "name must be a valid domain name")
    if len(name) > NAME_MAX:
        raise Invalid("name", f"name must be at most {NAME_MAX} characters")
    suffixes = _suffixes()
    if suffixes.publicsuffix(name) is None:
        raise Invalid("name", "name must end in a known public suffix")
    if suffixes.is_public(name) or suffixes.privatesuffix(name) is None:
        raise Invalid("name", f"name {name} is a public suffix; add a domain registered under it")
    return name


def registered_domain(name: str) -> str:
    """The domain registered under a public suffix that ``name`` belongs to."""
    return _suffixes().privatesuffix(name) or name


def return_path_label(value: Any) -> str:
    if value is None:
        return DEFAULT_RETURN_PATH
    if not isinstance(value, str) or not _LABEL.match(value.strip().lower()):
        raise Invalid(
            "custom_return_path",
            "custom_return_path must be one DNS label: letters, digits and hyphens, at most 63",
        )
    return value.strip().lower()


def tls_policy(value: Any) -> str:
    if value not in TLS_POLICIES:
        raise Invalid("tls", "tls must be `opportunistic` or `enforced`")
    return value


def _tracking(body: dict) -> None:
    """Accepted and always reported false (docs/contract/README.md, "Unavailable features")."""
    for field in ("open_tracking", "click_tracking"):
        if field in body and body[field] is not None and not isinstance(body[field], bool):
            raise Invalid(field, f"{field} must be a boolean")


def _capabilities(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise Invalid("capabilities", "capabilities must be an object")
    for key in ("sending", "receiving"):
        if key in value and value[key] not in ("enabled", "disabled"):
            raise Invalid(f"capabilities.{key}", f"capabilities.{key} must be `enabled` or `disabled`")
    if value.get("receiving") == "enabled":
        raise Invalid("capabilities.receiving", "capabilities.receiving: receiving mail is not available")
    if value.get("sending") == "disabled":
        raise Invalid("capabilities.sending", "capabilities.sending: sending must stay enabled")


@attrs.frozen
class NewDomain:
    name: str
    return_path: str
    tls: str


def new_domain(body: dict) -> NewDomain:
    name = domain_name(body.get("name"))
    return_path = return_path_label(body.get("custom_return_path"))
    tls = tls_policy(body.get("tls", "opportunistic") or "opportunistic")
    _tracking(body)
    _capabilities(body.get("capabilities"))
    return NewDomain(name, return_path, tls)


def domain_changes(body: dict) -> dict:
    """The stored changes of a PATCH: only ``tls`` is kept; the rest is checked and ignored."""
    _tracking(body)
    _capabilities(body.get("capabilities"))
    changes = {}
    if body.get("tls") is not None:
        changes["tls"] = tls_policy(body["tls"])
    return changes


# Records


@attrs.frozen
class DkimKey:
    selector: str
    algorithm: str  # rsa-sha256 | ed25519-sha256
    public_key: str  # base64

    @property
    def key_type(self) -> str:
        return "ed25519" if self.algorithm == "ed25519-sha256" else "rsa"


@attrs.frozen
class Record:
    """One record a domain publishes. ``key`` names it in the stored per-record statuses."""

    key: str
    purpose: str  # dkim | return_path | spf | dmarc
    record: str  # DKIM | SPF | DMARC (the API's spelling)
    name: str  # relative to the domain
    type: str  # TXT | MX
    value: str
    priority: int | None = None
    required: bool = True

    def fqdn(self, domain: str) -> str:
        return f"{self.name}.{domain}"


def dkim_value(key: DkimKey) -> str:
    return f"v=DKIM1; k={key.key_type}; p={key.public_key}"


def records_of(return_path: str, keys: list[DkimKey], mx_host: str, spf_include: str,
               domain: str = "") -> list[Record]:
    """DKIM per selector, the return path's MX and SPF, then the advisory DMARC record."""
    records = [
        Record(f"dkim:{k.selector}", "dkim", "DKIM", f"{k.selector}._domainkey", "TXT", dkim_value(k))
        for k in keys
    ]
    records += [
        Record("return_path_mx", "return_path", "SPF", return_path, "MX", mx_host, MX_PRIORITY),
        Record("return_path_spf", "spf", "SPF", return_path, "TXT", f"v=spf1 include:{spf_include} ~all"),
        Record("dmarc", "dmarc", "DMARC", "_dmarc", "TXT",
               dmarc_suggested(f"{return_path}.{domain}") if domain else DMARC_SUGGESTED, required=False),
    ]
    return records


def unpublishable_reason(mx_host: str) -> str | None:
    """
    Why records naming ``mx_host`` (the node's ``mail.hostname``: the return path's MX target and
    the SPF include under it) cannot be published in public DNS, or None when they can: a
    receiver cannot reach ``localhost`` nor a name without a dot.
    """
    name = mx_host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        problem = f"is {mx_host!r}"
    elif "." not in name:
        problem = f"{mx_host!r} has no dot"
    else:
        return None
    return (f"The node's mail hostname {problem}: the domain records that name it (the return path's "
            "MX and SPF include) are not publishable until mail.hostname is set to the node's public name.")


# What a lookup found


def _tags(text: str) -> dict[str, str]:
    tags = {}
    for part in text.split(";"):
        name, eq, value = part.partition("=")
        if eq:
            tags[name.strip().lower()] = "".join(value.split())
    return tags


def dkim_matches(txts: list[str], key: DkimKey) -> bool:
    for text in txts:
        tags = _tags(text)
        if tags.get("p") == key.public_key and tags.get("k", "rsa").lower() == key.key_type:
            return True
    return False


def is_spf(text: str) -> bool:
    lowered = text.strip().lower()
    return lowered == "v=spf1" or lowered.startswith("v=spf1 ")


def spf_includes(text: str, include: str) -> bool:
    wanted = f"include:{include}".lower()
    return any(term.lower().lstrip("+") == wanted for term in text.split()[1:])


def spf_matches(txts: list[str], include: str) -> bool:
    """Exactly one SPF record (two are a permanent error for receivers) with our include."""
    spf = [t for t in txts if is_spf(t)]
    return len(spf) == 1 and spf_includes(spf[0], include)


def merge_spf(existing: str, include: str) -> str:
    """``existing`` with ``include:<include>`` added before its ``all`` (or at the end)."""
    if spf_includes(existing, include):
        return existing
    terms = existing.split()
    at = next(
        (i for i, term in enumerate(terms) if i and term.lstrip("+-~?").lower() == "all"),
        len(terms),
    )
    terms.insert(at, f"include:{include}")
    return " ".join(terms)


def is_dmarc(text: str) -> bool:
    return text.strip().upper().startswith("V=DMARC1")


def host_matches(found: str, wanted: str) -> bool:
    return found.rstrip(".").lower() == wanted.rstrip(".").lower()


# How a check moves the status


@attrs.frozen
class CheckState:
    """What a domain's next check starts from (times in Unix seconds)."""

    status: str
    window_started: float | None
    checks: int
    suspect_since: float | None


@attrs.frozen
class Verdict:
    status: str
    record_status: dict[str, str]
    next_check_at: float | None
    suspect_since: float | None
    checks: int


def backoff(checks: int) -> float:
    return min(FIRST_RETRY * 2 ** min(checks, 20), MAX_RETRY)


def judge(
    state: CheckState,
    findings: dict[str, str],
    required: frozenset[str],
    now: float,
    window: float,
    recheck: float,
) -> Verdict:
    """
    ``findings`` maps each record key to MATCH, MISMATCH or TEMPORARY. The domain is verified
    when every required record matches. A pending domain fails once its window is over and a
    record is still missing; a verified one fails when records are missing on two checks
    CONFIRM_DELAY apart. Failed lookups (TEMPORARY) never change a status.
    """
    wanted = [findings[key] for key in required]
    missing = MISMATCH in wanted
    suspect = state.suspect_since
    if all(f == MATCH for f in wanted):
        status, next_at, suspect = "verified", now + recheck, None
    elif state.status == "verified":
        if not missing:
            status, next_at = "verified", now + VERIFIED_RETRY
        elif suspect is None:
            status, next_at, suspect = "verified", now + CONFIRM_DELAY, now
        else:
            status, next_at, suspect = "failed", None, None
    else:
        started = state.window_started if state.window_started is not None else now
        if missing and now >= started + window:
            status, next_at = "failed", None
        else:
            status, next_at = "pending", now + backoff(state.checks)
    record_status = {}
    for key, finding in findings.items():
        if finding == MATCH:
            record_status[key] = "verified"
        elif finding == TEMPORARY:
            record_status[key] = "temporary_failure"
        else:
            record_status[key] = "pending" if status == "pending" else "failed"
    return Verdict(status, record_status, next_at, suspect, state.checks + 1)


#: Statuses of a domain its account never got verified.
_NEVER_VERIFIED = ("not_started", "pending", "failed")


def claim_lapsed(status: str, created_at: float, now: float, window: float) -> bool:
    """
    Whether another account may take a domain name from the account that added it: only
    when that account never verified it within the verification window of adding it, so
    that nobody can hold a name they do not control (renewing checks does not renew this).
    """
    return status in _NEVER_VERIFIED and now - created_at >= window
