"""Runs steps through the official Node.js SDK (tests/node) against the in-process API."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from twisted.internet import reactor
from twisted.internet.utils import getProcessOutputAndValue

NODE_DIR = Path(__file__).parent.parent / "node"
SCRIPT = NODE_DIR / "sdk.mjs"


async def run_node(api, key: str, steps: list[dict]) -> list[dict]:
    """Runs tests/node/sdk.mjs with ``steps``; the SDK's {data, error} for each."""
    node = shutil.which("node")
    assert node, "node is not installed: scripts/test installs it (MAILSVC_TEST_DEPS=1)"
    assert (NODE_DIR / "node_modules" / "resend").is_dir(), "run scripts/test once: it installs tests/node"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "RESEND_API_KEY": key, "RESEND_BASE_URL": api.url}
    out, err, code = await getProcessOutputAndValue(
        node, [str(SCRIPT), json.dumps(steps)], env=env, path=str(NODE_DIR), reactor=reactor)
    assert code == 0, err.decode(errors="replace")
    return json.loads(out)
