"""A message SpamAssassin scores as spam."""

from pathlib import Path

SPAMMY = (Path(__file__).parent.parent / "samples" / "spam" / "spammy.txt").read_text()
