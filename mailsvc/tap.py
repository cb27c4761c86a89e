"""``twistd mailsvc``: options, and the service built from them."""

from __future__ import annotations

import sys

from twisted.python import usage


class Options(usage.Options):
    synopsis = "[--config FILE]"
    longdesc = (
        "Runs a mailsvc node. Settings come from the ini file named by --config, each "
        "overridable by an environment variable MAILSVC_<SECTION>_<KEY>."
    )
    optParameters = [
        ["config", "c", None, "Configuration file (ini)."],
        ["worker", None, None, "Internal: serve as a worker of the parent that started this process."],
        ["parent-logger", None, "", "Internal: a worker's parent's --logger."],
    ]


def worker_command(options: Options) -> list[str]:
    """
    How the parent starts a worker: twistd in the foreground with the parent's logger (the
    workers write to the parent's standard output and error) less Twisted's start-up chatter,
    this plugin, the same file.
    """
    command = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "--nodaemon", "--pidfile=",
               "--logger=mailsvc.logs.worker_observer", "mailsvc"]
    twistd = getattr(options, "parent", None)
    if twistd is not None and twistd.get("logger"):  # twistd has turned the name into the callable
        logger = twistd["logger"]
        command.append(f"--parent-logger={logger.__module__}.{logger.__qualname__}")
    if options["config"]:
        command += ["--config", options["config"]]
    return command


def makeService(options: Options):  # noqa: N802 (twistd's name)
    from mailsvc import processes, root
    from mailsvc.config import ConfigError, load

    try:
        config = load(options["config"])
    except ConfigError as e:
        raise SystemExit(f"mailsvc: configuration error: {e}") from None
    if options["worker"]:
        from mailsvc import logs

        logs.PARENT_LOGGER["name"] = options["parent-logger"]  # read by logs.worker_observer, next
        return root.build(config, inherited=processes.Inherited.from_json(options["worker"]))
    return root.build(config, worker_command=worker_command(options))
