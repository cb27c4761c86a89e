"""
bench/idsink.py, the soak's sink: the Message-ID is read from the header section (folded or
not, never from the body), and the check counts missing, duplicated and unexpected arrivals;
bench/soak.py's "flat" tells steady growth from a warm-up.
"""

from bench import idsink, soak


def test_message_id_is_read_from_the_header_section():
    data = b"From: a@x.test\r\nMessage-ID: <1@x.test>\r\n\r\nMessage-ID: <body@x.test>\r\n"
    assert idsink.message_id(data) == b"<1@x.test>"


def test_a_folded_message_id_is_read():
    assert idsink.message_id(b"message-id:\r\n <2@x.test>\r\nSubject: s\r\n\r\nbody") == b"<2@x.test>"


def test_a_message_without_one_is_marked():
    assert idsink.message_id(b"Subject: s\r\n\r\nMessage-ID: <body@x.test>\r\n") == b"-"


def test_check_counts_missing_duplicated_and_unexpected():
    seen = {"<a>": [1.0], "<b>": [1.0, 2.0, 3.0], "<z>": [1.0]}
    assert idsink.check(["<a>", "<b>", "<c>"], seen) == {
        "accepted": 3, "distinct_accepted": 3, "missing": 1, "duplicated": 2, "unexpected": 1}


def test_every_one_once_is_clean():
    assert idsink.check(["<a>", "<b>"], {"<a>": [1.0], "<b>": [2.0]})["missing"] == 0


def test_flat_after_a_warm_up():
    assert soak.flat([50_000] * 2 + [80_000] * 40)


def test_steady_growth_is_not_flat():
    assert not soak.flat([80_000 + 1_000 * i for i in range(40)])
