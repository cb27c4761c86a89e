"""
bench/stages.py, the stages of the CPU budget (docs/benchmarks.md, "CPU budget per
message"): every pattern names a module and function that exist now, so a rename cannot
silently empty a stage; and a sample is put in the stage of its innermost named frame.
"""

import importlib
import inspect
from pathlib import Path

import pytest

from bench import budget, stages

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = [(s.name, p) for s in stages.STAGES for p in s.patterns]
EARLIER = [(s.name, p) for s in stages.STAGES for p in s.earlier]


def _resolve(module: str, qualname: str):
    found = importlib.import_module(module)
    if qualname == "*":
        return found
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize(("stage", "pattern"), PATTERNS, ids=[f"{s}:{m}:{f}" for s, (m, f) in PATTERNS])
def test_every_pattern_names_a_function_or_class_that_exists(stage, pattern):
    found = _resolve(*pattern)
    if pattern[1] != "*":
        assert inspect.isfunction(found) or inspect.isclass(found), f"{stage}: {pattern} is not a function or class"
        assert found.__qualname__ == pattern[1], f"{stage}: {pattern} is {found.__qualname__} (an alias)"
    assert budget.defined(ROOT, *pattern) or not pattern[0].startswith("mailsvc"), \
        f"bench/budget.py's reading of the source does not find {pattern}"


@pytest.mark.parametrize(("stage", "pattern"), EARLIER, ids=[f"{s}:{m}:{f}" for s, (m, f) in EARLIER])
def test_an_earlier_name_is_gone_now(stage, pattern):
    with pytest.raises((ImportError, AttributeError)):
        _resolve(*pattern)
    assert not budget.defined(ROOT, *pattern)


def test_every_stage_of_the_table_has_mailsvc_functions():
    for stage in stages.STAGES:
        assert stage.name in stages.ORDER
        assert any(m.startswith("mailsvc") for m, _ in stage.patterns), stage.name


def test_the_tree_check_refuses_a_tree_without_a_stage(tmp_path):
    (tmp_path / "mailsvc").mkdir()
    with pytest.raises(SystemExit, match="no function of the stage"):
        budget.check_tree(tmp_path)
    budget.check_tree(ROOT)


def test_a_sample_goes_to_its_innermost_named_frame_since_the_last_resumption():
    frames = [
        "EPollReactor.doPoll (twisted/internet/epollreactor.py:1)",
        "Connection.doRead (twisted/internet/tcp.py:2)",
        "OutboundSMTP.lineReceived (mailsvc/smtp/outbound.py:3)",
        "Deferred._runCallbacks (twisted/internet/defer.py:4)",
        "_inlineCallbacks (twisted/internet/defer.py:5)",
        "DeliveryWorker._send (mailsvc/delivery/worker.py:6)",
        "DeliveryWorker._answered (mailsvc/delivery/worker.py:7)",
        "uuid4 (uuid.py:8)",
    ]
    assert stages.stage_of("delivery", frames) == "outcome"
    assert stages.stage_of("delivery", frames[:3]) == "SMTP I/O"
    signing = ["DeliveryWorker._signed.<locals>.sign (/srv/tree/mailsvc/delivery/worker.py:9)",
               "sign (mailsvc/mail/dkim.py:10)", "RSAPrivateKey.sign (site-packages/cryptography/x.py:11)"]
    assert stages.stage_of("delivery", signing) == "DKIM sign"
    assert stages.stage_of("delivery", frames[:2]) == "SMTP I/O"
    assert stages.stage_of("api", frames[:2]) == "HTTP accept"  # the same socket code, the HTTP side
    assert stages.stage_of("api", ["EPollReactor.doPoll (twisted/internet/epollreactor.py:1)"]) == stages.OTHER


def test_statements_go_to_their_stages():
    assert stages.statement_stage("WITH x AS (INSERT INTO emails (id) VALUES (1))") == "accept statement"
    assert stages.statement_stage("DELETE FROM webhook_handover WHERE ...") == "webhook fan-out"
    assert stages.statement_stage("COMMIT") == "other statements"
