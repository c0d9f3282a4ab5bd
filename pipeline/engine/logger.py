"""The engine's logger (``turnledger.engine``), bound once per structlog configuration.

Every part of the turn engine logs through :func:`engine_logger`, so a turn's
log lines carry one logger name whichever part wrote them.
"""

from __future__ import annotations

from typing import Any

import structlog

from turnledger.pipeline.logs import library_logger

_bound: list[tuple[tuple[int, ...], Any]] = []


def engine_logger() -> Any:
    """The engine's logger, bound once per structlog configuration.

    structlog's lazy proxy builds a logger on every call; this binds one and
    keeps it while the configuration (processors, wrapper class, logger
    factory, context class) is the same objects, so a later ``configure``
    (the CLI's ``-v``, a test's ``capture_logs``) is still honoured. Until
    the application configures structlog, the lines go to the stdlib logger
    ``turnledger.engine`` (see :func:`~turnledger.pipeline.logs.library_logger`),
    never to stdout.
    """
    config = structlog.get_config()
    key = tuple(
        id(config[name])
        for name in ("processors", "wrapper_class", "logger_factory", "context_class")
    )
    if not _bound or _bound[0][0] != key:
        _bound[:] = [(key, library_logger("turnledger.engine").bind())]
    return _bound[0][1]
