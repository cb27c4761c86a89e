"""
What reading a claim's contents costs the delivery node per e-mail, past the driver: CPU µs of
``store/delivery_contents.parse`` over ``--emails`` rows shaped as its SELECT gives them
(transactional e-mails of one signing domain with two keys; with ``--broadcast``, a broadcast's
e-mails, each with its recipient's snapshot), best of ``--runs``; then the same with each
e-mail's fields read as the delivery path reads a one-recipient transactional e-mail's
(``READS``). The rows are built here, and an e-mail read as a dict or as a row, so the command
runs on any tree whose SELECT gives these columns: another commit's figure is the same command
in a ``git archive`` of it with this file copied into its bench/.

    .venv/bin/python -m bench.contents [--emails 100] [--runs 200] [--broadcast]
"""

from __future__ import annotations

import argparse
import time
import uuid
from datetime import UTC, datetime

from mailsvc.store import delivery_contents

#: The e-mail's columns of the SELECT, then what it aggregates and joins beside them.
EMAIL = ("id", "tenant_id", "message_id", "sender", "recipients", "subject", "html", "text", "headers", "stream",
         "links_base", "created_at", "message", "signed", "domain_id", "domain", "return_path", "tls",
         "broadcast_id", "contact_id", "snapshot")
BESIDE = ("own_ids", "own_messages", "first_of_broadcast", "first_of_domain", "attachment_filename",
          "attachment_content_type", "attachment_content_id", "attachment_content", "key_id", "key_selector",
          "key_algorithm", "key_private_key", "broadcast_subject", "broadcast_html", "broadcast_text",
          "broadcast_preview_text", "broadcast_links_base", "has_broadcast")

#: The e-mail's fields the delivery path reads for a one-recipient transactional e-mail, in
#: order: grouping (delivery/transactions.py), building (app/messages.py), the envelope sender
#: and signing (delivery/worker.py).
READS = ("tls", "message", "stream", "broadcast_id", "domain_id", "sender", "domain_id", "signed", "domain_id",
         "signed", "domain_id", "id", "id", "id", "message", "recipients", "subject", "html", "text", "sender",
         "headers", "stream", "message_id", "created_at", "id", "domain", "return_path", "domain", "domain", "id")
#: The reads written out as the code writes them (no loop over names), of a dict and of a row.
READERS: dict = {}
exec("def read_dict(e):\n" + "".join(f"    e[{n!r}]\n" for n in READS), READERS)
exec("def read_row(e):\n" + "".join(f"    e.{n}\n" for n in READS), READERS)


def rows(count: int, broadcast: bool) -> list[dict]:
    tenant, domain, broadcast_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4() if broadcast else None
    made = []
    for n in range(count):
        row = dict.fromkeys(EMAIL + BESIDE)
        row.update(
            id=uuid.uuid4(), tenant_id=tenant, message_id=f"<{n}@acme.example.com>", sender="news@acme.example.com",
            recipients={"to": [f"r{n}@example.com"], "cc": [], "bcc": [], "reply_to": []}, subject="Hello",
            html="<p>Hi</p>" if not broadcast else None, stream="broadcast" if broadcast else "transactional",
            created_at=datetime.now(UTC), signed=False, domain_id=domain, domain="acme.example.com",
            return_path="bounces", tls="opportunistic", broadcast_id=broadcast_id,
            first_of_broadcast=n == 0, first_of_domain=n == 0, has_broadcast=broadcast and n == 0)
        if broadcast:
            row.update(contact_id=uuid.uuid4(), snapshot={"first_name": f"R{n}"})
        if n == 0:
            row.update(key_id=[uuid.uuid4(), uuid.uuid4()], key_selector=["a", "b"],
                       key_algorithm=["rsa-sha256", "ed25519-sha256"], key_private_key=[memoryview(b"k" * 80)] * 2)
        if broadcast and n == 0:
            row.update(broadcast_subject="News", broadcast_html="<p>News</p>", broadcast_links_base="https://x")
        made.append(row)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--emails", type=int, default=100)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--broadcast", action="store_true")
    args = parser.parse_args()
    claimed = rows(args.emails, args.broadcast)
    emails = list(delivery_contents.parse(claimed).emails.values())
    read = READERS["read_dict"] if isinstance(emails[0], dict) else READERS["read_row"]
    best, best_read = float("inf"), float("inf")
    for _ in range(args.runs):
        started = time.process_time()
        delivery_contents.parse(claimed)
        parsed = time.process_time()
        for email in delivery_contents.parse(claimed).emails.values():
            read(email)
        best, best_read = min(best, parsed - started), min(best_read, time.process_time() - parsed)
    kind = "broadcast" if args.broadcast else "transactional"
    print(f"{args.emails} {kind} e-mails' rows, best of {args.runs} ({delivery_contents.__file__}):")
    print(f"  parse {best / args.emails * 1e6:.2f} µs CPU per e-mail;"
          f" parse and {len(READS)} reads {best_read / args.emails * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
