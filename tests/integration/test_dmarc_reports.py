"""DMARC aggregate reports read back: the suggested record's rua points at the return-path
host; receivers' reports (Google's zip, Microsoft's gzip, Yahoo's namespaced XML; samples
written for these tests in tests/samples/dmarc) arrive by SMTP at the real inbound listener,
are parsed safely and summed per day in GET /domains/{id}/dmarc. An XML bomb, an external
entity and an oversized zip are refused."""

import gzip
import io
import zipfile

import jsonschema_rs
import pytest
import pytest_twisted as pt

from mailsvc.http import openapi
from mailsvc.mail import dmarc
from tests.helpers.dmarc import SAMPLES, report_message, xml, zipped
from tests.helpers.returns import RETURN_HOST, port, submit  # noqa: F401 (port: a fixture)


@pt.ensureDeferred
async def test_reports_from_several_receivers_are_summed_per_day(mta, port):  # noqa: F811
    _, key = await mta.sender()
    (domain,) = (await mta.json("GET", "/domains", key))[1]["data"]
    record = next(r for r in (await mta.json("GET", f"/domains/{domain['id']}", key))[1]["records"]
                  if r["record"] == "DMARC")
    assert record["value"] == f"v=DMARC1; p=none; rua=mailto:dmarc@{RETURN_HOST};"

    google = report_message("noreply-dmarc-support@google.com", zipped("google.com!acme.zip", xml("google.xml")),
                            "google.com!acme.example.com!1!2.zip", "application/zip")
    microsoft = report_message("dmarcreport@microsoft.com", gzip.compress(xml("microsoft.xml")),
                               "enterprise.protection.outlook.com!acme.example.com!1!2.xml.gz", "application/gzip")
    yahoo = report_message("dmarchelp@yahooinc.com", xml("yahoo.xml", days_ago=2), "yahoo.xml", "text/xml")
    for sender, message in (("g@google.com", google), ("m@microsoft.com", microsoft), ("y@yahoo.com", yahoo)):
        assert await submit(port, sender, [f"dmarc@{RETURN_HOST}"], message) == {}
    # The same report twice is stored once.
    await submit(port, "g@google.com", [f"dmarc@{RETURN_HOST}"], google)

    code, summary, _ = await mta.json("GET", f"/domains/{domain['id']}/dmarc", key)
    assert code == 200 and summary["object"] == "dmarc_summary" and summary["domain"] == "acme.example.com"
    jsonschema_rs.validate(openapi.DMARC, summary)  # the reply the OpenAPI document describes
    yesterday, before = summary["data"]
    assert yesterday["messages"] == 75 and before["messages"] == 8
    assert yesterday["dkim_pass_rate"] == round(65 / 75, 4) and yesterday["spf_pass_rate"] == round(40 / 75, 4)
    sources = {s["source_ip"]: s for s in yesterday["sources"]}
    assert sources["192.0.2.10"]["messages"] == 65
    assert sources["192.0.2.10"]["reporters"] == ["Enterprise Outlook", "google.com"]
    assert sources["198.51.100.7"]["dkim_pass_rate"] == 0.0
    assert before["sources"][0]["source_ip"] == "2001:db8::25" and before["dkim_pass_rate"] == 1.0
    assert (await mta.json("GET", f"/domains/{domain['id']}/dmarc?days=1", key))[1]["data"] == []
    assert (await mta.json("GET", f"/domains/{domain['id']}/dmarc?days=0", key))[0] == 422


@pt.ensureDeferred
async def test_a_report_about_another_domain_is_dropped(mta, port):  # noqa: F811
    await mta.sender()
    other = xml("google.xml").replace(b"<domain>acme.example.com</domain>", b"<domain>victim.example</domain>")
    await submit(port, "g@google.com", [f"dmarc@{RETURN_HOST}"],
                 report_message("g@google.com", gzip.compress(other), "r.xml.gz", "application/gzip"))
    assert not await mta.parts.db.fetchall("SELECT 1 FROM dmarc_reports")


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
