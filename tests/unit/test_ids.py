"""UUIDv7 ids: ordered within a process, well formed, and a forked child's random bits its own."""

import os
from datetime import UTC, datetime, timedelta

from mailsvc.ids import first_id_at, start_over, uuid7


def test_ids_of_one_instant_increase_and_are_version_7():
    start_over()  # ids made before at a later time would carry this process past the instant
    made = [uuid7(1_767_225_600.0) for _ in range(5000)]  # more ids than one block of random bytes
    assert made == sorted(made) and len(set(made)) == len(made)
    assert {u.version for u in made} == {7} and {u.variant for u in made} == {"specified in RFC 4122"}
    assert {u.int >> 80 for u in made} >= {1_767_225_600_000}


def test_a_forked_child_does_not_reuse_the_parents_random_bytes():
    uuid7(1_767_225_600.0)  # the parent holds a block of random bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id's random bits, then out
        os.write(write, uuid7(1_767_225_600.0).bytes)
        os._exit(0)
    os.close(write)
    child = os.read(read, 16)
    os.waitpid(pid, 0)
    parent = uuid7(1_767_225_600.0).bytes
    assert child[8:] != parent[8:]  # rand_b: 62 random bits each


def test_the_first_id_of_an_instant_bounds_the_ids_of_that_millisecond_and_after():
    at = datetime(2026, 12, 3, 8, 0, 0, 250_000, tzinfo=UTC)
    start_over()
    before = uuid7((at - timedelta(milliseconds=1)).timestamp())
    same = [uuid7(at.timestamp()) for _ in range(100)]
    assert before < first_id_at(at)
    assert all(first_id_at(at) <= one < first_id_at(at + timedelta(milliseconds=1)) for one in same)
