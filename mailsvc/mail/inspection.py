"""
A stored message read as a receiver reads it (the development inbox): its parts,
its DKIM signatures verified by dkimpy against the keys given, and SPF and DMARC judged from
the records given. No I/O: the caller looks the records up (``app/inbox.py``).
"""

from __future__ import annotations

import email
import email.errors
import email.header
import email.policy
import email.utils
import re

import dkim as dkimpy

from mailsvc.domain.domains import is_dmarc, spf_matches
from mailsvc.mail.limits import Exceeded, MimeLimits, exceeded


def read(message: bytes, limits: MimeLimits) -> dict | Exceeded:
    """
    What the development inbox shows of a message's own bytes (its parts, header fields, author
    domain, DKIM signatures, List-Unsubscribe), or the limit it passes: not parsed then.
    """
    over = exceeded(message, limits)
    if over is not None:
        return over
    return {**parts(message), "author": author_domain(message), "signatures": signatures(message),
            "list_unsubscribe": unsubscribe(message)}


def html_of(message: bytes, limits: MimeLimits, dark: bool) -> str | None:
    """The message's HTML part (as a client in dark mode shows it, ``dark``); None without one or over a limit."""
    if exceeded(message, limits) is not None:
        return None
    html = parts(message)["html"]
    return as_dark(html) if dark and html is not None else html


def parts(message: bytes) -> dict:
    """
    html, text, header fields (name, value) in order, and attachments (without content). Read
    with the ``compat32`` policy, once: the default policy parses a structured field again at
    each read, a Content-Type of 2 KB in some milliseconds, which made a message of 500 such
    parts take seconds.
    """
    parsed = email.message_from_bytes(message, policy=email.policy.compat32)
    html = text = None
    attachments = []
    for part in parsed.walk():
        if part.is_multipart():
            continue
        disposition = part.get_content_disposition()
        kind = part.get_content_type()
        if disposition is None and kind == "text/html" and html is None:
            html = _content(part)
        elif disposition is None and kind == "text/plain" and text is None:
            text = _content(part)
        else:
            payload = part.get_payload(decode=True) or b""
            content_id = part.get("Content-ID")
            attachments.append({"filename": _filename(part), "content_type": kind,
                                "disposition": disposition or "attachment",
                                "content_id": None if content_id is None else str(content_id), "size": len(payload)})
    # The fields as written (encoded words and all), each unfolded: what was signed.
    headers = [[name, re.sub(r"\r?\n[ \t]+", " ", str(value)).strip()] for name, value in parsed.items()]
    return {"html": html, "text": text, "headers": headers, "attachments": attachments}


def _filename(part) -> str | None:
    """The filename (RFC 2231 parameters and encoded words decoded, as the default policy does)."""
    name = part.get_filename()
    if name is None or "=?" not in name:
        return name
    try:
        return str(email.header.make_header(email.header.decode_header(name)))
    except (LookupError, ValueError, email.errors.HeaderParseError):
        return name


def _content(part) -> str:
    """A text part's content decoded by its charset (unknown: UTF-8), as ``get_content`` decodes it."""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_param("charset", "ASCII")
    if isinstance(charset, tuple):  # an RFC 2231 value
        charset = email.utils.collapse_rfc2231_value(charset, "ASCII")
    try:
        content = payload.decode(str(charset), "replace")
    except LookupError:
        content = payload.decode("utf-8", "replace")
    return content.replace("\r\n", "\n")


def header(message: bytes, name: str) -> str | None:
    parsed = email.message_from_bytes(message, policy=email.policy.compat32)
    value = parsed.get(name)
    return None if value is None else re.sub(r"\r?\n[ \t]+", " ", str(value)).strip()


def signatures(message: bytes) -> list[tuple[str, str]]:
    """(d=, s=) of each DKIM-Signature field, in order."""
    parsed = email.message_from_bytes(message, policy=email.policy.compat32)
    found = []
    for value in parsed.get_all("DKIM-Signature") or ():
        tags = {k: re.sub(r"\s+", "", v) for k, v in _tags(str(value)).items()}
        found.append((tags.get("d", "").lower(), tags.get("s", "")))
    return found


def key_name(domain: str, selector: str) -> str:
    return f"{selector}._domainkey.{domain}"


def verify_dkim(message: bytes, keys: dict[str, str | None]) -> list[dict]:
    """Each signature verified by dkimpy, its key's TXT record from ``keys`` (by key name; None:
    none published)."""

    def dnsfunc(name, timeout=5):
        wanted = (name.decode("ascii") if isinstance(name, bytes) else name).rstrip(".").lower()
        record = keys.get(wanted)
        return record.encode("ascii") if record is not None else None

    results = []
    for index, (domain, selector) in enumerate(signatures(message)):
        try:
            good = dkimpy.DKIM(message).verify(idx=index, dnsfunc=dnsfunc)
            detail = "the signature verifies with the published key" if good else "the signature does not verify"
        except dkimpy.DKIMException as e:
            good, detail = False, str(e)
        results.append({"result": "pass" if good else "fail", "domain": domain, "selector": selector,
                        "detail": detail})
    return results


def judge_spf(envelope_domain: str, records: list[str], include: str) -> dict:
    """SPF as a receiver would judge the node's mail: the envelope domain's one record must
    include the service's SPF host, which lists the node's addresses."""
    spf = [r for r in records if r.strip().lower().startswith("v=spf1")]
    if not spf:
        return {"result": "none", "domain": envelope_domain, "detail": f"{envelope_domain} publishes no SPF record"}
    if len(spf) > 1:
        return {"result": "permerror", "domain": envelope_domain,
                "detail": f"{envelope_domain} publishes {len(spf)} SPF records"}
    if spf_matches(spf, include):
        return {"result": "pass", "domain": envelope_domain, "detail": f"the SPF record includes {include}"}
    return {"result": "fail", "domain": envelope_domain,
            "detail": f"the SPF record does not include {include}, which lists this node's addresses"}


def _tags(record: str) -> dict[str, str]:
    return {k.strip().lower(): v.strip() for k, _, v in (t.partition("=") for t in record.split(";")) if k.strip()}


def _aligned(domain: str, author: str, strict: bool) -> bool:
    domain, author = domain.lower().rstrip("."), author.lower().rstrip(".")
    if strict:
        return domain == author
    return domain == author or domain.endswith("." + author) or author.endswith("." + domain)


def judge_dmarc(author_domain: str, records: list[str], dkim: list[dict], spf: dict) -> dict:
    """DMARC: a passing DKIM signature or SPF result whose domain is aligned with the From's."""
    dmarc = next((r for r in records if is_dmarc(r)), None)
    tags = _tags(dmarc) if dmarc else {}
    dkim_aligned = any(r["result"] == "pass" and _aligned(r["domain"], author_domain, tags.get("adkim") == "s")
                       for r in dkim)
    spf_aligned = spf["result"] == "pass" and _aligned(spf["domain"], author_domain, tags.get("aspf") == "s")
    result = "pass" if dkim_aligned or spf_aligned else "fail"
    if dmarc is None:
        return {"result": "none", "domain": author_domain, "policy": None, "dkim_aligned": dkim_aligned,
                "spf_aligned": spf_aligned, "detail": f"{author_domain} publishes no DMARC record"
                + (" (the mail would pass one: aligned)" if result == "pass" else "")}
    return {"result": result, "domain": author_domain, "policy": tags.get("p"), "dkim_aligned": dkim_aligned,
            "spf_aligned": spf_aligned,
            "detail": "aligned" if result == "pass" else "neither DKIM nor SPF passes aligned with the From domain"}


def author_domain(message: bytes) -> str:
    return email.utils.parseaddr(header(message, "From") or "")[1].rpartition("@")[2].lower()


def unsubscribe(message: bytes) -> dict:
    """The List-Unsubscribe headers, and whether they make an RFC 8058 one-click unsubscribe."""
    link = header(message, "List-Unsubscribe")
    post = header(message, "List-Unsubscribe-Post")
    one_click = bool(link and "<https://" in link.lower() and post
                     and post.replace(" ", "") == "List-Unsubscribe=One-Click")
    return {"list_unsubscribe": link, "list_unsubscribe_post": post, "one_click": one_click}


_COLOUR_SCHEME_QUERY = re.compile(r"\(\s*prefers-color-scheme\s*:\s*(dark|light)\s*\)", re.IGNORECASE)


def as_dark(html: str) -> str:
    """
    The HTML as a mail client in dark mode shows it: its ``(prefers-color-scheme: dark)`` rules
    apply and its ``light`` ones do not. A preview frame cannot be told the reader's preference
    (Chromium gives a frame its page's, whatever the frame's ``color-scheme``), so the queries
    are rewritten to ones always (``min-width: 0px``) or never (a negative width) true.
    """
    return _COLOUR_SCHEME_QUERY.sub(
        lambda m: "(min-width: 0px)" if m[1].lower() == "dark" else "(max-width: -1px)", html)
