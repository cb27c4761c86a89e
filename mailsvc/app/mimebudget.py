"""
The MIME budget of an accepted message: at most MAX_MESSAGE_BYTES once built, and no more MIME
parts than a message submitted over SMTP may have (``mail.max_mime_parts``).
"""

from __future__ import annotations

from datetime import datetime

from mailsvc.domain.email import Submission
from mailsvc.domain.errors import Invalid, OverMimeLimit
from mailsvc.mail import mime
from mailsvc.mail.limits import MimeLimits

MAX_MESSAGE_BYTES = 40 * 1024 * 1024


class MimeBudget:
    def __init__(self, limits: MimeLimits):
        self._limits = limits

    def check_parts(self, submission: Submission) -> None:
        """The MIME parts the message would have, against the limit a submitted message has too."""
        most = self._limits.parts
        parts = mime.part_count(submission, [(a.filename, b"", a.content_type, a.content_id)
                                             for a in submission.attachments])
        if parts > most:
            raise OverMimeLimit("attachments", f"attachments: the message would have {parts} MIME parts, more than"
                                               f" {most} (mail.max_mime_parts is {most})", "max_mime_parts")

    @staticmethod
    def check_built(submission: Submission, message_id: str, date: datetime, parts: list) -> None:
        """The message built of ``submission`` and its attachments' ``parts``, within MAX_MESSAGE_BYTES."""
        if mime.size_bound(submission, parts) > MAX_MESSAGE_BYTES and len(mime.build(
                submission, message_id=message_id, date=date, attachments=parts)) > MAX_MESSAGE_BYTES:
            # Built here only when the bound passes the limit: whether the message really does.
            raise _too_large()

    @staticmethod
    def check_message(message: bytes) -> None:
        """A message submitted over SMTP, as it is stored, within MAX_MESSAGE_BYTES."""
        if len(message) > MAX_MESSAGE_BYTES:
            raise _too_large()


def _too_large() -> Invalid:
    return Invalid("attachments", "attachments: the built message exceeds 40 MiB")
