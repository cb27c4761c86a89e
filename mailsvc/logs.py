"""Log observers for twistd's ``--logger``: one JSON object per line (journald, collectors)."""

from __future__ import annotations

import sys

from twisted.logger import jsonFileLogObserver


def json_observer():
    """``twistd --logger=mailsvc.logs.json_observer``: JSON lines on standard output."""
    return jsonFileLogObserver(sys.stdout, recordSeparator="")
