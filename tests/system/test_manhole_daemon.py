"""
The daemon refuses a manhole off loopback in one line, before the store starts.
"""

import pytest

from tests.helpers.daemon import free_port, twistd


@pytest.mark.slow
def test_daemon_refuses_a_manhole_off_loopback_in_one_line(tmp_path):
    daemon = twistd(tmp_path / "state", free_port(), MAILSVC_MANHOLE_LISTEN="tcp:0:interface=0.0.0.0")
    out, err = daemon.communicate(timeout=60)
    assert daemon.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("mailsvc:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("mailsvc: cannot start: manhole.listen:") and "loopback" in lines[0]
    assert not (tmp_path / "state" / "postgresql").exists()  # refused before the store started
