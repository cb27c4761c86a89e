"""
What a DNS provider set-up changes in a zone: exactly the service's records, created or
updated, with an existing SPF record merged (never a second one) and an existing DMARC policy
kept. Running the plan on its own result changes nothing.
"""

from __future__ import annotations

import re

import attrs

from mailsvc.domain.domains import (
    DkimKey,
    Record,
    dkim_matches,
    host_matches,
    is_dmarc,
    is_spf,
    merge_spf,
    spf_includes,
)


@attrs.frozen
class Existing:
    """A record already in the zone (``name`` fully qualified, TXT content unquoted)."""

    id: str
    type: str
    name: str
    content: str
    priority: int | None = None


@attrs.frozen
class Step:
    purpose: str
    type: str
    name: str
    content: str
    action: str  # created | updated | unchanged | kept
    priority: int | None = None
    previous: str | None = None
    record_id: str | None = None  # the record an update replaces

    def as_dict(self) -> dict:
        out: dict[str, object] = {"purpose": self.purpose, "type": self.type, "name": self.name,
                                  "content": self.content}
        if self.priority is not None:
            out["priority"] = self.priority
        out["action"] = self.action
        if self.previous is not None:
            out["previous"] = self.previous
        return out


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def unquote_txt(content: str) -> str:
    """TXT content as one string: ``"a" "b"`` (how providers often show it) is ``ab``."""
    text = content.strip()
    if not text.startswith('"'):
        return text
    return "".join(re.sub(r"\\(.)", r"\1", part) for part in _QUOTED.findall(text))


def plan(
    domain: str, records: list[Record], keys: dict[str, DkimKey], existing: dict[str, list[Existing]],
    spf_include: str,
) -> list[Step]:
    steps = []
    for record in records:
        name = record.fqdn(domain)
        here = existing.get(name, [])
        same_type = [e for e in here if e.type == record.type]
        wanted = Step(record.purpose, record.type, name, record.value, "created", record.priority)
        if record.purpose == "dkim":
            if any(dkim_matches([e.content], keys[record.key]) for e in same_type):
                steps.append(attrs.evolve(wanted, action="unchanged"))
                continue
            ours = next((e for e in same_type if "p=" in e.content or "DKIM1" in e.content), None)
            steps.append(_update(wanted, ours) if ours else wanted)
        elif record.purpose == "return_path":
            match = next((e for e in same_type if host_matches(e.content, record.value)), None)
            steps.append(attrs.evolve(wanted, action="unchanged", priority=match.priority) if match else wanted)
        elif record.purpose == "spf":
            spf = next((e for e in same_type if is_spf(e.content)), None)
            if spf is None:
                steps.append(wanted)
            elif spf_includes(spf.content, spf_include):
                steps.append(attrs.evolve(wanted, content=spf.content, action="unchanged"))
            else:
                steps.append(_update(attrs.evolve(wanted, content=merge_spf(spf.content, spf_include)), spf))
        else:
            policy = next((e for e in same_type if is_dmarc(e.content)), None)
            if policy is None:
                steps.append(wanted)
            else:
                action = "unchanged" if policy.content == record.value else "kept"
                steps.append(attrs.evolve(wanted, content=policy.content, action=action))
    return steps


def _update(wanted: Step, current: Existing) -> Step:
    return attrs.evolve(wanted, action="updated", previous=current.content, record_id=current.id)
