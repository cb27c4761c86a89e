"""``twistd mailsvc``: options, and the service built from them."""

from __future__ import annotations

from twisted.python import usage


class Options(usage.Options):
    synopsis = "[--config FILE]"
    longdesc = (
        "Runs a mailsvc node. Settings come from the ini file named by --config, each "
        "overridable by an environment variable MAILSVC_<SECTION>_<KEY>."
    )
    optParameters = [["config", "c", None, "Configuration file (ini)."]]


def makeService(options: Options):  # noqa: N802 (twistd's name)
    from mailsvc import compose
    from mailsvc.config import ConfigError, load

    try:
        config = load(options["config"])
    except ConfigError as e:
        raise SystemExit(f"mailsvc: configuration error: {e}") from None
    return compose.build(config)
