"""
The limits on a message's MIME structure (``mail/limits.py``): each just under and just over,
counted as the ``email`` package counts, in one scan with no recursion.
"""

from __future__ import annotations

import email
import email.policy
import time

import pytest

from mailsvc.mail.limits import MimeLimits, exceeded

pytestmark = pytest.mark.timeout(30)

HEAD = b"From: a@example.com\r\nTo: b@example.net\r\nSubject: s\r\nMIME-Version: 1.0\r\n"


def flat(parts: int, boundary: bytes = b"b") -> bytes:
    """A multipart/mixed message of ``parts`` entities in all (itself and parts - 1 text parts)."""
    body = b"".join(b"--" + boundary + b"\r\nContent-Type: text/plain\r\n\r\npart\r\n" for _ in range(parts - 1))
    return (HEAD + b'Content-Type: multipart/mixed; boundary="' + boundary + b'"\r\n\r\npreamble\r\n' + body
            + b"--" + boundary + b"--\r\nepilogue\r\n")


def nested(depth: int) -> bytes:
    """Multiparts nested so that the innermost text part is ``depth`` levels deep."""
    opened = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i)
                      for i in range(depth - 1))
    closed = b"".join(b"\r\n--b%d--\r\n" % i for i in reversed(range(depth - 1)))
    return HEAD + opened + b"Content-Type: text/plain\r\n\r\ndeep" + closed


def entities(raw: bytes) -> int:
    return sum(1 for _ in email.message_from_bytes(raw, policy=email.policy.compat32).walk())


def test_a_simple_message_is_within_every_limit():
    assert exceeded(HEAD + b"\r\nHello\r\n", MimeLimits()) is None
    assert exceeded(b"", MimeLimits()) is None
    assert exceeded(b"no header at all", MimeLimits()) is None


def test_parts_are_counted_as_the_email_package_counts_them():
    raw = flat(500)
    assert entities(raw) == 500
    assert exceeded(raw, MimeLimits()) is None
    over = exceeded(flat(501), MimeLimits())
    assert over.setting == "max_mime_parts" and over.limit == 500
    assert over.message == "the message has more than 500 MIME parts (mail.max_mime_parts is 500)"


def test_a_part_whose_boundary_ends_its_header_section_still_counts():
    # No empty line after the part's fields: the boundary line ends them, as the parser reads it.
    raw = HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n' + b"--b\r\nX-A: 1\r\n" * 10 + b"--b--\r\n"
    assert entities(raw) == 11
    assert exceeded(raw, MimeLimits(parts=11)) is None
    assert exceeded(raw, MimeLimits(parts=10)).setting == "max_mime_parts"


def test_bare_lf_and_cr_line_ends_are_read_like_crlf():
    raw = flat(20).replace(b"\r\n", b"\n")
    assert exceeded(raw, MimeLimits(parts=20)) is None
    assert exceeded(raw, MimeLimits(parts=19)).setting == "max_mime_parts"
    assert exceeded(flat(20).replace(b"\r\n", b"\r"), MimeLimits(parts=19)).setting == "max_mime_parts"


def test_lines_that_only_look_like_boundaries_are_no_parts():
    raw = (HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\n\r\n' + b"--bx\r\n-- b\r\n--\r\n" * 100
           + b"--b--\r\n")
    assert entities(raw) == 2
    assert exceeded(raw, MimeLimits(parts=2)) is None


def test_nested_messages_and_digests_count_their_parts_and_depth():
    inner = b"Content-Type: message/rfc822\r\n\r\n" * 3 + b"Subject: in\r\n\r\nbody\r\n"
    raw = HEAD + inner
    assert entities(raw) == 4
    assert exceeded(raw, MimeLimits(depth=4)) is None
    assert exceeded(raw, MimeLimits(depth=3)).setting == "max_mime_depth"
    # A digest's parts are messages by default: each holds one more entity, one level deeper.
    digest = (HEAD + b'Content-Type: multipart/digest; boundary="d"\r\n\r\n'
              + b"--d\r\n\r\nSubject: x\r\n\r\nbody\r\n" * 3 + b"--d--\r\n")
    assert entities(digest) == 7
    assert exceeded(digest, MimeLimits(parts=7, depth=3)) is None
    assert exceeded(digest, MimeLimits(parts=6)).setting == "max_mime_parts"
    assert exceeded(digest, MimeLimits(depth=2)).setting == "max_mime_depth"


def test_depth_just_under_and_just_over():
    assert exceeded(nested(50), MimeLimits()) is None
    over = exceeded(nested(51), MimeLimits())
    assert over.setting == "max_mime_depth"
    assert over.message == "the message has MIME parts nested more than 50 deep (mail.max_mime_depth is 50)"


def test_an_outer_boundary_ends_the_parts_inside_it():
    # The inner multipart never closes: the outer boundary ends it, the next part is the outer's.
    raw = (HEAD + b'Content-Type: multipart/mixed; boundary="o"\r\n\r\n--o\r\n'
           + b'Content-Type: multipart/mixed; boundary="i"\r\n\r\n--i\r\n\r\nin\r\n'
           + b"--o\r\n\r\nsecond\r\n--o--\r\n")
    assert entities(raw) == 4
    assert exceeded(raw, MimeLimits(parts=4, depth=3)) is None
    assert exceeded(raw, MimeLimits(parts=3)).setting == "max_mime_parts"


def test_1200_levels_deep_is_a_clean_refusal_without_recursion():
    # The email package recurses into it (a RecursionError after some 5 s of CPU): the scan stops
    # at the limit (CPU time of this process, so a busy machine does not fail it).
    started = time.process_time()
    over = exceeded(nested(1200), MimeLimits())
    assert over.setting == "max_mime_depth"
    assert time.process_time() - started < 0.5


def test_header_fields_of_every_part_count_together():
    raw = HEAD + b"X-A: 1\r\n" * 996 + b"\r\nbody\r\n"  # 4 + 996 fields
    assert exceeded(raw, MimeLimits()) is None
    assert exceeded(HEAD + b"X-A: 1\r\n" * 997 + b"\r\nbody\r\n", MimeLimits()).setting == "max_header_fields"
    parts = flat(11)  # 4 + 1 fields at the top, 1 in each of 10 parts
    assert exceeded(parts, MimeLimits(header_fields=15)) is None
    over = exceeded(parts, MimeLimits(header_fields=14))
    assert over.setting == "max_header_fields" and "more than 14 header fields" in over.message
    # A folded field is one field.
    assert exceeded(HEAD + b"X-A: 1\r\n 2\r\n 3\r\n\r\n", MimeLimits(header_fields=5)) is None


def test_header_bytes_just_under_and_just_over():
    def message(size: int) -> bytes:
        # HEAD, "X-Long: " and its CRLF, then the empty line: ``size`` bytes of header section.
        pad = size - len(HEAD) - len(b"X-Long: \r\n\r\n")
        return HEAD + b"X-Long: " + b"x" * pad + b"\r\n\r\nbody"

    assert exceeded(message(1024 * 1024), MimeLimits()) is None
    over = exceeded(message(1024 * 1024 + 1), MimeLimits())
    assert over.setting == "max_header_bytes" and over.limit == 1024 * 1024


def test_20000_parts_are_refused_without_a_pass_per_part():
    # CPU time of this process, so a busy machine does not fail it: a scan that went over the
    # message once per part would take seconds here, the bounded one takes milliseconds.
    raw = flat(20_000)
    started = time.process_time()
    assert exceeded(raw, MimeLimits()).setting == "max_mime_parts"
    assert time.process_time() - started < 0.5
    # The largest allowed message of plain lines is scanned in one pass too.
    body = b"line of text that is no boundary\r\n" * 200_000
    raw = HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\n\r\n' + body
    started = time.process_time()
    assert exceeded(raw, MimeLimits()) is None
    assert time.process_time() - started < 2


@pytest.mark.parametrize("html, text, inline, regular", [
    ("<p>x</p>", None, 0, 0), ("<p>x</p>", "x", 0, 0), (None, "x", 0, 0), ("<p>x</p>", "", 0, 0),
    ("<p>x</p>", None, 2, 0), ("<p>x</p>", None, 0, 3), ("<p>x</p>", "x", 2, 3), (None, "x", 1, 1),
])
def test_the_parts_counted_for_an_api_email_are_those_its_built_message_has(html, text, inline, regular):
    from datetime import UTC, datetime

    from mailsvc.domain.email import Submission
    from mailsvc.domain.headers import parse_mailbox
    from mailsvc.mail import mime

    submission = Submission(sender=parse_mailbox("from", "a@example.com"), to=(parse_mailbox("to", "b@example.net"),),
                            subject="s", html=html, text=text)
    attachments = [(f"{i}.png", b"x", "image/png", f"c{i}") for i in range(inline)]
    attachments += [(f"{i}.txt", b"x", "text/plain", None) for i in range(regular)]
    built = mime.build(submission, message_id="<m@example.com>", date=datetime(2026, 1, 1, tzinfo=UTC),
                       attachments=attachments)
    assert mime.part_count(submission, attachments) == entities(built)
    assert exceeded(built, MimeLimits(parts=entities(built))) is None
