"""
DMARC aggregate reports parsed safely: receivers' samples (tests/samples/dmarc) read; an
XML bomb, an external entity, an oversized zip, a gzip bomb and a zip of several files are
refused. Reports arriving by SMTP and summed per day: tests/integration/test_dmarc_reports.py.
"""

import gzip
import io
import zipfile

import pytest

from mailsvc.mail import dmarc
from tests.helpers.dmarc import SAMPLES, report_message, zipped

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<feedback><report_metadata><org_name>&lol3;</org_name></report_metadata></feedback>"""

EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE feedback [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<feedback><report_metadata><org_name>&xxe;</org_name></report_metadata></feedback>"""


@pytest.mark.parametrize("document", [BOMB, EXTERNAL])
def test_entities_are_refused(document):
    with pytest.raises(dmarc.ReportRefused, match="refused XML"):
        dmarc.parse(document)


def test_an_oversized_zip_is_refused():
    # 64 MiB of zeros compress to about 64 KiB: the limit is on what comes out.
    bomb = zipped("report.xml", b"<feedback>" + b"0" * (64 * 1024 * 1024))
    assert len(bomb) < 200_000
    message = report_message("x@example.com", bomb, "r.zip", "application/zip")
    with pytest.raises(dmarc.ReportRefused, match="over"):
        dmarc.documents(message, 20 * 1024 * 1024)


def test_a_gzip_bomb_is_refused_while_reading():
    bomb = gzip.compress(b"0" * (30 * 1024 * 1024))
    with pytest.raises(dmarc.ReportRefused, match="over"):
        dmarc.documents(report_message("x@example.com", bomb, "r.xml.gz", "application/gzip"), 20 * 1024 * 1024)


def test_a_zip_of_several_files_is_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("a.xml", b"<feedback/>")
        archive.writestr("b.xml", b"<feedback/>")
    with pytest.raises(dmarc.ReportRefused, match="exactly one"):
        dmarc.documents(report_message("x@example.com", out.getvalue(), "r.zip", "application/zip"), 1024)


@pytest.mark.parametrize("name", ["google.xml", "microsoft.xml", "yahoo.xml"])
def test_samples_parse(name):
    report = dmarc.parse((SAMPLES / name).read_bytes())
    assert report.domain == "acme.example.com" and report.rows and report.policy == "none"
