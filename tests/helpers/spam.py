"""Shared by the tests (from tests/test_spam_score.py)."""

from pathlib import Path

SPAMMY = (Path(__file__).parent.parent / "samples" / "spam" / "spammy.txt").read_text()
