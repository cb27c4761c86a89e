"""The .deb: built, installed, run with the unit's command line, removed and purged (scripts/deb-install-test)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("dpkg-buildpackage") is None or shutil.which("dh") is None,
                    reason="needs root, dpkg-buildpackage and debhelper (scripts/setup.sh installs them)")
def test_the_package_installs_serves_and_purges_cleanly():
    run = subprocess.run([str(ROOT / "scripts" / "deb-install-test")], capture_output=True, text=True, timeout=540)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    assert "deb install test: ok" in run.stdout
