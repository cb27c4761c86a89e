"""
Where a submitted message's time goes in the server, from the client's final "." to the 250
(``python -m bench.sending --only smtp --stages``): the submission server's steps are wrapped
in the server process (``install``, before the node is built), each message's moments kept,
and the means per stage written when the process gets SIGUSR1 (``summary``). Wall time, not
CPU: a stage that waits (a statement, a queue) counts its wait. The group commit's stages are
its group's, seen by each message of the group.
"""

from __future__ import annotations

import contextvars
import json
import signal
import time
from pathlib import Path

#: The stages in order: each is the time from the previous moment to this one.
STAGES = [
    ("checks", "'.' read, the size and line checks (submission.py)"),
    ("rate limit", "RateLimiter.take"),
    ("parse", "check_structure, header_fields, submission_from_message"),
    ("prepare", "Submitter: account, sending domain, Message-ID, resubmitted"),
    ("group wait", "queued until its group commit's statement starts"),
    ("suppressions", "the group's suppression read"),
    ("accept statement", "the group's accept statement, COMMIT included"),
    ("answer", "the group done until the 250 is given to TLS"),
]

_message: contextvars.ContextVar[dict] = contextvars.ContextVar("message")


def install(out: Path) -> None:
    """Wrap the steps; on SIGUSR1 write the means since the last SIGUSR1 to ``out`` and start again."""
    from mailsvc.app import submit
    from mailsvc.smtp import intake, submission
    from mailsvc.store import accept, groupcommit

    done: list[dict] = []
    groups: list[int] = []
    by_request: dict[int, dict] = {}
    clock = time.perf_counter

    def mark(name: str) -> None:
        record = _message.get(None)
        if record is not None:
            record[name] = clock()

    received = submission.SubmissionProtocol._message_received

    def message_received(self, sender, recipients, message):
        self._stage_dot = clock()
        return received(self, sender, recipients, message)

    accepting = submission.SubmissionProtocol._accept

    async def accept_(self, message, recipients):
        record = {"dot": self._stage_dot, "checks": clock()}
        _message.set(record)
        reply = self._reply

        def replied(code, enhanced, text):
            record["answer"] = clock()
            self._reply = reply
            reply(code, enhanced, text)
        self._reply = replied
        try:
            await accepting(self, message, recipients)
        finally:
            self._reply = reply
        if "accept statement" in record:
            done.append(record)

    def after(function, name):
        async def wrapped(*args, **kwargs):
            result = await function(*args, **kwargs)
            mark(name)
            return result
        return wrapped

    def after_sync(function, name):
        def wrapped(*args, **kwargs):
            result = function(*args, **kwargs)
            mark(name)
            return result
        return wrapped

    adding = groupcommit.GroupCommit.add

    async def add(self, request, size):
        record = _message.get(None)
        if record is not None:
            record["prepare"] = clock()
            by_request[id(request)] = record
        return await adding(self, request, size)

    writing = submit.Submitter._write

    async def write_group(self, group):
        records = [r for r in (by_request.pop(id(one), None) for one in group) if r is not None]
        start = clock()
        groups.append(len(group))
        for record in records:
            record["group wait"] = start
        token = _message.set({"group": records})
        try:
            return await writing(self, group)
        finally:
            end = clock()
            for record in records:
                record["accept statement"] = end
            _message.reset(token)

    statement = accept.write

    async def accept_write(*args, **kwargs):
        now = clock()
        for record in _message.get({}).get("group", []):
            record["suppressions"] = now
        return await statement(*args, **kwargs)

    limits: list[float] = []

    def counted(function):
        async def wrapped(*args, **kwargs):
            start = clock()
            try:
                return await function(*args, **kwargs)
            finally:
                limits.append(clock() - start)
        return wrapped

    from mailsvc.store import api_rate
    api_rate.take, api_rate.lease = counted(api_rate.take), counted(api_rate.lease)
    submission.SubmissionProtocol._message_received = message_received
    submission.SubmissionProtocol._accept = accept_
    intake.RateLimiter.take = after(intake.RateLimiter.take, "rate limit")
    intake.submission_from_message = after_sync(intake.submission_from_message, "parse")
    groupcommit.GroupCommit.add = add
    submit.Submitter._write = write_group
    accept.write = accept_write

    def dump(*_):
        records, done[:] = list(done), []
        sizes, groups[:] = list(groups), []
        means = {}
        previous = "dot"
        for name, _ in STAGES:
            means[name] = sum(r[name] - r[previous] for r in records) / max(len(records), 1) * 1e6
            previous = name
        statements, limits[:] = list(limits), []
        written = out.with_suffix(".part")
        written.write_text(json.dumps({
            "messages": len(records), "means_us": means, "group_mean": sum(sizes) / max(len(sizes), 1),
            "groups": len(sizes), "limit_statements": len(statements),
            "limit_statement_us": sum(statements) / max(len(statements), 1) * 1e6,
            "limit_waits": sum(1 for r in records if r["rate limit"] - r["checks"] > 0.001)}))
        written.rename(out)

    signal.signal(signal.SIGUSR1, dump)
