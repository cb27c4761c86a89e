"""
DMARC aggregate reports (RFC 7489 §7.2, appendix C) as receivers send them: an XML document,
gzip-compressed (``.xml.gz``) or zipped (``.zip``), as an attachment or as the whole body.
Anyone can send one, so everything is bounded before it is read: the message, the compressed
attachment, the decompressed document (read in slices, never past the limit), one XML file per
zip; and the XML is parsed by ``defusedxml``: no DTD, no entity, no external reference.
"""

from __future__ import annotations

import email
import email.policy
import gzip
import io
import zipfile
import zlib
from datetime import UTC, datetime

import attrs
from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

MAX_RECORDS = 100_000


class ReportRefused(Exception):
    """Not a report we read (too large, not XML, an XML bomb, not an aggregate report)."""


@attrs.frozen
class ReportRow:
    source_ip: str
    count: int
    disposition: str
    dkim_aligned: bool
    spf_aligned: bool
    header_from: str


@attrs.frozen
class AggregateReport:
    org_name: str
    report_id: str
    begin: datetime
    end: datetime
    domain: str  # policy_published/domain
    policy: str  # p=...
    rows: tuple[ReportRow, ...]


def documents(message: bytes, max_xml: int) -> list[bytes]:
    """The XML documents of a report message (attachments or body), each at most ``max_xml``."""
    parsed = email.message_from_bytes(message, policy=email.policy.compat32)
    found = []
    for part in parsed.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)  # bytes (or None) for a part that is not multipart
        if not isinstance(payload, bytes):
            payload = b""
        name = (part.get_filename() or "").lower()
        kind = part.get_content_type().lower()
        if payload[:2] == b"\x1f\x8b" or name.endswith(".gz") or "gzip" in kind:
            found.append(_gunzip(payload, max_xml))
        elif payload[:4] == b"PK\x03\x04" or name.endswith(".zip") or "zip" in kind:
            found.extend(_unzip(payload, max_xml))
        elif name.endswith(".xml") or kind in ("text/xml", "application/xml") or payload.lstrip()[:5] == b"<?xml":
            if len(payload) > max_xml:
                raise ReportRefused("the XML document is too large")
            found.append(payload)
    return found


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            while chunk := f.read(64 * 1024):
                out += chunk
                if len(out) > limit:
                    raise ReportRefused(f"the decompressed report is over {limit} bytes")
    except (OSError, EOFError, zlib.error) as e:
        raise ReportRefused(f"not a gzip file: {e}") from None
    return bytes(out)


def _unzip(data: bytes, limit: int) -> list[bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise ReportRefused(f"not a zip file: {e}") from None
    if len(members) != 1:
        raise ReportRefused("a zipped report holds exactly one file")
    (member,) = members
    if member.file_size > limit:
        raise ReportRefused(f"the zipped report is over {limit} bytes")
    out = bytearray()
    try:
        with archive.open(member) as f:  # the declared size may lie: read no more than the limit
            while chunk := f.read(64 * 1024):
                out += chunk
                if len(out) > limit:
                    raise ReportRefused(f"the zipped report is over {limit} bytes")
    except (zipfile.BadZipFile, OSError, zlib.error, RuntimeError) as e:
        raise ReportRefused(f"the zip file cannot be read: {e}") from None
    return [bytes(out)]


def _text(node, path: str, default: str = "") -> str:
    found = node.find(path)
    return (found.text or "").strip() if found is not None and found.text else default


def parse(document: bytes) -> AggregateReport:
    try:
        root = ElementTree.fromstring(document, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise ReportRefused(f"refused XML: {type(e).__name__}") from None
    except ElementTree.ParseError as e:
        raise ReportRefused(f"not XML: {e}") from None
    # Some receivers put the RFC 7489 appendix C namespace (or the draft's) on every element.
    for element in root.iter():
        if isinstance(element.tag, str) and "}" in element.tag:
            element.tag = element.tag.split("}", 1)[1]
    if root.tag != "feedback":
        raise ReportRefused("not a DMARC aggregate report")
    try:
        begin = datetime.fromtimestamp(int(_text(root, "report_metadata/date_range/begin")), UTC)
        end = datetime.fromtimestamp(int(_text(root, "report_metadata/date_range/end")), UTC)
    except (ValueError, OverflowError, OSError):
        raise ReportRefused("the report has no valid date range") from None
    rows: list[ReportRow] = []
    for record in root.iter("record"):
        if len(rows) >= MAX_RECORDS:
            raise ReportRefused("too many records")
        try:
            count = int(_text(record, "row/count", "0"))
        except ValueError:
            continue
        rows.append(ReportRow(
            _text(record, "row/source_ip")[:64],
            max(0, min(count, 2**31 - 1)),
            _text(record, "row/policy_evaluated/disposition", "none")[:16],
            _text(record, "row/policy_evaluated/dkim").lower() == "pass",
            _text(record, "row/policy_evaluated/spf").lower() == "pass",
            _text(record, "identifiers/header_from")[:255].lower(),
        ))
    org, report_id = _text(root, "report_metadata/org_name"), _text(root, "report_metadata/report_id")
    domain = _text(root, "policy_published/domain").lower().rstrip(".")
    if not org or not report_id or not domain:
        raise ReportRefused("the report names no organisation, id or domain")
    return AggregateReport(org[:255], report_id[:255], begin, end, domain, _text(root, "policy_published/p")[:16],
                           tuple(rows))
