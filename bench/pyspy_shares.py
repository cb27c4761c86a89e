"""
Shares of a py-spy profile of the accept path, by group (docs/benchmarks.md, "Accept
path"): ``py-spy record --pid PID --format raw -d 15 -o FILE`` while wrk runs against a
server left up by ``python -m bench.sending --keep``, then

    python -m bench.pyspy_shares FILE [TOP]

prints the groups, the functions with the most samples of their own, and our functions by
inclusive samples. Idle thread-pool workers are left out. A sample belongs to the innermost
of the groups' functions among the frames run since the last resumption of a coroutine or
run of a Deferred callback: what lies above that is whatever fired the Deferred (a request
resumed by its rate limit's answer is not the rate limiter's work).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

#: The innermost frame that matches one of these names the group.
GROUPS = [
    ("text_from_html", r"mailsvc/domain/htmltext\.py|text_from_html \("),
    ("MIME build", r"mailsvc/mail/mime\.py"),
    ("JSON parse", r"json/decoder\.py|mailsvc/http/body\.py"),
    ("JSON encode", r"json/encoder\.py|psycopg2/_json\.py"),
    ("validation/addresses", r"mailsvc/domain/(email|addresses)\.py|idna/|email/(_header_value_parser|headerregistry)"),
    ("accept rows/statement assembly", r"mailsvc/store/(accept|events|groupcommit)\.py|_rows_of|Submitter\._write"
                                       r"|mailsvc/ids\.py|mailsvc/timefmt\.py|mailsvc/domain/delivery\.py"),
    ("txpostgres/psycopg2", r"txpostgres|psycopg2|mailsvc/store/(database|connection)\.py"),
    ("rate limit", r"mailsvc/app/ratelimit\.py|mailsvc/store/api_rate"),
    ("auth/keyring", r"mailsvc/app/apikeys\.py"),
    ("logging/metrics", r"prometheus_client|mailsvc/metrics\.py|twisted/logger|Site\.log"),
    ("submit (other)", r"mailsvc/app/submit\.py|mailsvc/app/idempotency"),
]
#: Matched only when none of GROUPS is.
GENERIC = [
    ("Twisted/Klein HTTP", r"twisted/web|klein/|werkzeug/|mailsvc/http/"),
    ("reactor/Deferreds/other Twisted", r"twisted/"),
]
RESUMED = re.compile(r"^(_inlineCallbacks|Deferred\._runCallbacks) \(twisted/internet/defer")


def stacks(path: str):
    """``(frames, samples)`` of each stack of a raw profile, idle thread-pool workers left out."""
    with open(path) as lines:
        for line in lines:
            if not line.strip():
                continue
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if frames[0].startswith("Thread._bootstrap") and "Condition.wait" in frames[-1]:
                continue
            yield frames, int(count)


def group(frames: list[str]) -> str:
    for i in range(len(frames) - 1, -1, -1):
        if RESUMED.match(frames[i]):
            frames = frames[i + 1:]
            break
    if not frames:
        return "reactor/Deferreds/other Twisted"
    for table in (GROUPS, GENERIC):
        for frame in reversed(frames):
            for name, pattern in table:
                if re.search(pattern, frame):
                    return name
    return "other"


def function(frame: str) -> str:
    return re.sub(r":\d+\)", ")", frame)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    path, top = argv[0], int(argv[1]) if len(argv) > 1 else 20
    total = 0
    own, inclusive, groups = Counter(), Counter(), Counter()
    for frames, n in stacks(path):
        total += n
        own[function(frames[-1])] += n
        for f in {function(f) for f in frames}:
            inclusive[f] += n
        groups[group(frames)] += n
    print(f"{path}: {total} samples\n\ngroups")
    for name, n in groups.most_common():
        print(f"{n / total:6.1%}  {name}")
    print("\nown samples")
    for f, n in own.most_common(top):
        print(f"{n / total:6.1%}  {f}")
    print("\nour functions, inclusive")
    for f, n in [(f, n) for f, n in inclusive.most_common() if "mailsvc/" in f][:top]:
        print(f"{n / total:6.1%}  {f}")


if __name__ == "__main__":
    main()
