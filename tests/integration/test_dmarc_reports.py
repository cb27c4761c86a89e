"""
DMARC aggregate reports read back: the suggested record's rua points at the return-path
host; receivers' reports (Google's zip, Microsoft's gzip, Yahoo's namespaced XML; samples
written for these tests in tests/samples/dmarc) arrive by SMTP at the real inbound listener
and are summed per day in GET /domains/{id}/dmarc; a report about another domain is dropped.
Parsing and its refusals: tests/unit/test_dmarc_reports_parsing.py.
"""

import gzip

import jsonschema_rs
import pytest_twisted as pt

from tests.helpers.dmarc import report_message, xml, zipped
from tests.helpers.openapi import reply_schema
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
    jsonschema_rs.validate(reply_schema(mta, "GET", "/domains/<domain_id>/dmarc"), summary)  # as documented
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


