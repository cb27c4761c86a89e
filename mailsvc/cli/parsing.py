"""
The command line's argparse, keeping tokens out of what it echoes: the command line takes no
token (``--token-file`` names a file), and a usage error never repeats one given anyway.
"""

from __future__ import annotations

import argparse
import re
import sys

from mailsvc.domain.display import shown


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written (line breaks kept)."""


#: An option that names a token (``--token``, ``--operator-token``...), which the command line
#: does not take: what follows it is likely a secret. ``--token-file`` names a file.
_TOKEN_OPTION = re.compile(r"-[\w-]*token(?![\w-]*file)[\w-]*", re.I)
REDACTED = "<redacted>"


def secrets_in(argv: list[str]) -> list[str]:
    """The values given to an option naming a token (``--token X``, ``--token=X``)."""
    found = []
    for option, value in zip(argv, [*argv[1:], None], strict=False):
        name, equals, given = option.partition("=")
        if _TOKEN_OPTION.fullmatch(name):
            if equals and given:
                found.append(given)
            elif not equals and value:
                found.append(value)
    return found


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error never repeats a token given on the command line (argparse
    echoes an unknown option with its value, or takes the value for a verb and echoes it too),
    and shows nothing of what it echoes that could act on the terminal."""

    _secrets: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        self._secrets = secrets_in(args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        for secret in sorted(self._secrets, key=len, reverse=True):
            message = message.replace(secret, REDACTED)
        super().error(shown(message))
