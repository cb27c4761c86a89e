"""
The unit tier keeps its promise (tests/unit/conftest.py): no database, daemon or browser
fixture, no socket. A test that breaks the rule fails, naming where it belongs.
"""

import socket
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

RULES = (Path(__file__).parent / "conftest.py").read_text()


def test_a_unit_test_asking_for_the_database_fails_naming_its_tier(pytester):
    pytester.makeconftest(RULES)
    pytester.makepyfile(test_tiered="""
        import pytest

        @pytest.fixture
        def pg_dsn():
            return "dbname=x"

        @pytest.fixture
        def db(pg_dsn):
            return pg_dsn

        def test_reads_the_store(db):
            pass

        def test_on_a_table():
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:twisted")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_reads_the_store uses db, pg_dsn: it belongs in tests/integration*"])


def test_a_unit_test_cannot_connect():
    with pytest.raises(AssertionError, match="a unit test may not use the network"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_nor_listen():
    with socket.socket() as listener, pytest.raises(AssertionError, match="may not use the network"):
        listener.bind(("127.0.0.1", 0))
