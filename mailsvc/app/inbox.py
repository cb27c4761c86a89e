"""
The development inbox: what the door kept (``delivery/door.py``), listed, and each
message read as a receiver would read it. A verified domain's message is checked against the
records its domain publishes, looked up through the node's own resolver; the test sender's,
signed with the node's test key, against that key and nothing else (nothing of the test
domain's real DNS is consulted), its checks labelled ``simulated``.

Every read of a message's bytes (its parts, its DKIM signatures verified) runs out of the
reactor's process (``parse``: a pool of processes, ``compose.process_pool_runner``): a message
whose parse takes a second holds up no other request, not even through the GIL, as a thread of
the reactor's process would (healthz waited 260 ms behind three such reads in threads). A
message over a limit of ``mail/limits.py`` (an old row, kept before the limits applied at
submission) is not parsed at all: it is shown as its source, with the limit it passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from mailsvc import timefmt
from mailsvc.app.spam import SpamChecks
from mailsvc.dns import verify
from mailsvc.domain.errors import NotFound, SpamCheckUnavailable
from mailsvc.domain.paging import Page
from mailsvc.mail import dkim, inspection, simulated
from mailsvc.mail.limits import Exceeded, MimeLimits
from mailsvc.store import inbox as store
from mailsvc.store.database import Database


def _listed(row: dict) -> dict:
    return {"object": "inbox_message", "id": str(row["id"]), "email_id": str(row["email_id"]), "from": row["sender"],
            "to": list(row["recipients"]), "subject": row["subject"], "outcome": row["outcome"],
            "simulated": row["simulated"], "created_at": timefmt.resource(row["created_at"])}


async def _run_here(fn: Callable[..., Any], *args) -> Any:
    return fn(*args)


class Inbox:
    def __init__(self, db: Database, resolver, spf_include: str, test_signer: dkim.Signer,
                 spam: SpamChecks | None = None,
                 parse: Callable[..., Awaitable[Any]] = _run_here,
                 limits: MimeLimits | None = None):
        self._db = db
        self._resolver = resolver
        self._spf_include = spf_include
        self._test_record = simulated.test_key_record(test_signer)
        self._spam = spam
        self._parse = parse
        self._limits = limits or MimeLimits()

    async def page(self, tenant_id: uuid.UUID, page: Page) -> tuple[list[dict], bool]:
        rows, more = await store.page(self._db, tenant_id, page)
        return [_listed(r) for r in rows], more

    async def _row(self, tenant_id: uuid.UUID, inbox_id: uuid.UUID | None) -> dict:
        row = await store.get(self._db, tenant_id, inbox_id) if inbox_id is not None else None
        if row is None:
            raise NotFound("Inbox message")
        return row

    async def html(self, tenant_id: uuid.UUID, inbox_id: uuid.UUID | None, dark: bool = False) -> str:
        message = bytes((await self._row(tenant_id, inbox_id))["message"])
        html = await self._parse(inspection.html_of, message, self._limits, dark)
        if html is None:
            raise NotFound("Inbox message's HTML")
        return html

    async def message(self, tenant_id: uuid.UUID, inbox_id: uuid.UUID | None) -> dict:
        row = await self._row(tenant_id, inbox_id)
        message = bytes(row["message"])
        read = await self._parse(inspection.read, message, self._limits)
        shown = {**_listed(row), "return_path": row["return_path"], "html_url": f"/dashboard/inbox/{row['id']}/html",
                 "raw": message.decode("utf-8", "replace")}
        if isinstance(read, Exceeded):
            # Its source only: the parts are not read, nor is anything checked.
            return {**shown, "html": None, "text": None, "headers": [], "attachments": [], "checks": None,
                    "over_limit": {"setting": f"mail.{read.setting}", "limit": read.limit,
                                   "message": f"Not parsed: {read.message}."}}
        return {
            **shown, "html": read["html"], "text": read["text"], "headers": read["headers"],
            "attachments": read["attachments"], "checks": await self._checks(message, row, read),
            "over_limit": None,
        }

    async def _checks(self, message: bytes, row: dict, read: dict) -> dict:
        author = read["author"]
        envelope_domain = row["return_path"].rpartition("@")[2]
        if row["simulated"]:
            keys = {inspection.key_name(d, s): self._test_record if s == simulated.TEST_SELECTOR else None
                    for d, s in read["signatures"]}
            spf = {"result": "pass", "domain": envelope_domain,
                   "detail": "simulated: the test domain's return path is this node's own"}
            dmarc_records = ["v=DMARC1; p=reject"]
        else:
            keys = {}
            for domain, selector in read["signatures"]:
                name = inspection.key_name(domain, selector)
                keys[name] = await self._txt(name, lambda found: next(iter(found), None))
            spf_records = await self._txt(envelope_domain, list)
            spf = inspection.judge_spf(envelope_domain, spf_records or [], self._spf_include) \
                if spf_records is not None else _temporary(envelope_domain)
            dmarc_records = await self._txt(f"_dmarc.{author}", list) or []
        dkim_results = await self._parse(inspection.verify_dkim, message, keys)
        if row["simulated"]:
            for result in dkim_results:
                result["detail"] = "simulated: " + result["detail"].replace("the published key", "this node's test key")
        dmarc = inspection.judge_dmarc(author, dmarc_records, dkim_results, spf)
        if row["simulated"]:
            dmarc["detail"] = "simulated: " + dmarc["detail"]
            dmarc["policy"] = None
        return {"simulated": row["simulated"], "dkim": dkim_results, "spf": spf, "dmarc": dmarc,
                "list_unsubscribe": read["list_unsubscribe"], "spam": await self._spam_score(message)}

    async def _txt(self, name: str, pick):
        """``pick`` of the TXT strings at ``name``; None when the lookup gave no usable answer."""
        try:
            return pick(await verify.texts(self._resolver, name))
        except verify.LookupFailed:
            return None

    async def _spam_score(self, message: bytes) -> dict | None:
        if self._spam is None or not self._spam.enabled:
            return None
        try:
            return (await self._spam.spam_check(message)).as_dict()
        except SpamCheckUnavailable as e:  # the page shows why
            return {"object": "spam_score", "error": str(e)}


def _temporary(domain: str) -> dict:
    return {"result": "temperror", "domain": domain, "detail": f"no usable DNS answer for {domain}"}

