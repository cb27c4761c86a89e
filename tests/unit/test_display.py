"""What the command line shows of a text it did not write (mailsvc/domain/display.py)."""

import unicodedata

import pytest

from mailsvc.domain.display import shown

CASES = [
    # Plain text, accents, other scripts and emoji are shown as they are.
    ("451 4.7.1 try again later", "451 4.7.1 try again later"),
    ("Café Müller", "Café Müller"),
    ("שלום عربى 日本語 🙂", "שלום عربى 日本語 🙂"),
    (r"C:\path \x1b", r"C:\path \x1b"),
    ("", ""),
    # C0, including what a one-line field has no use for: TAB, LF, CR.
    ("451 \x1b[2J\x1b[H\x1b]0;PWNED\x07", r"451 \x1b[2J\x1b[H\x1b]0;PWNED\x07"),
    ("a\tb", r"a\x09b"),
    ("one\ntwo\r\n", r"one\x0atwo\x0d\x0a"),
    ("\x00", r"\x00"),
    # DEL and C1 (U+009B is a one-byte CSI).
    ("\x7f", r"\x7f"),
    ("\x9b2J\x85", r"\x9b2J\x85"),
    # Bidirectional embeddings, overrides and isolates.
    ("Acme\u202eevil", r"Acme\u202eevil"),
    ("\u202a\u202b\u202c\u202d", r"\u202a\u202b\u202c\u202d"),
    ("\u2066\u2067\u2068\u2069", r"\u2066\u2067\u2068\u2069"),
    ("\u061c", r"\u061c"),
    # Zero-width characters and marks, the byte-order mark, the Unicode line breaks.
    ("Ac\u200bme", r"Ac\u200bme"),
    ("\u200c\u200d\u200e\u200f", r"\u200c\u200d\u200e\u200f"),
    ("\ufeffAcme", r"\ufeffAcme"),
    ("a\u2028b\u2029", r"a\u2028b\u2029"),
    # A lone surrogate (JSON can carry one; no terminal encoding can write it).
    ("x\ud800", r"x\ud800"),
    # Neighbours that stay: NBSP, en space, and the characters either side of the ranges.
    ("a\u00a0b\u2002c", "a\u00a0b\u2002c"),
    ("\u2010\u2030\u2065\u206a", "\u2010\u2030\u2065\u206a"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_shown(text, expected):
    assert shown(text) == expected


def test_shown_is_one_printable_line_and_takes_any_value():
    assert shown(None) == "None" and shown(451) == "451"
    text = shown("".join(chr(c) for c in range(0x10000)))
    # No control, surrogate or Unicode line break is left, nor a bidirectional or zero-width one.
    assert not {c for c in text if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")}
    assert not set(text) & set("\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                               "\u2066\u2067\u2068\u2069\ufeff")
    text.encode("utf-8")
