"""DMARC aggregate reports (tests/samples/dmarc) as a receiver mails them: dated, zipped, in a message."""

import io
import re
import time
import zipfile
from email.message import EmailMessage
from pathlib import Path

from tests.helpers.returns import RETURN_HOST

SAMPLES = Path(__file__).parent.parent / "samples" / "dmarc"
DAY = 86400


def xml(name: str, days_ago: int = 1) -> bytes:
    """A sample, its date range moved to ``days_ago`` UTC days before today."""
    begin = (int(time.time()) // DAY - days_ago) * DAY
    text = (SAMPLES / name).read_text()
    text = re.sub(r"<begin>\d+</begin>", f"<begin>{begin}</begin>", text)
    text = re.sub(r"<end>\d+</end>", f"<end>{begin + DAY - 1}</end>", text)
    return text.encode()


def zipped(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def report_message(sender: str, attachment: bytes, filename: str, kind: str) -> bytes:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"dmarc@{RETURN_HOST}"
    message["Subject"] = f"Report domain: acme.example.com Submitter: {sender}"
    message.set_content("This is an aggregate report.")
    maintype, subtype = kind.split("/")
    message.add_attachment(attachment, maintype=maintype, subtype=subtype, filename=filename)
    return message.as_bytes()
