"""schemathesis against the live daemon, from its own /openapi.json (tests/helpers/fuzz_node.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_schemathesis_finds_nothing_on_the_live_daemon():
    assert os.geteuid() == 0, "the fuzzer runs in a network namespace of its own (unshare --net): run as root"
    # The node and the fuzzer share a fresh network namespace with loopback only: no fuzzed
    # address or URL can leave the machine.
    fuzz = f"ip link set lo up && exec {sys.executable} -m tests.helpers.fuzz_node"
    run = subprocess.run(
        ["unshare", "--net", "--", "bash", "-c", fuzz],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=360,
    )
    print(run.stdout[-20000:])
    print(run.stderr[-5000:], file=sys.stderr)
    assert run.returncode == 0, run.stdout[-8000:]
    cases = int(run.stdout.rsplit("cases: ", 1)[1].split()[0])
    assert cases >= 5000
    assert "daemon logged errors" not in run.stdout
