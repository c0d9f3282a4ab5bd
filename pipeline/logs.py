"""The library's loggers: structlog's once the application configured it, else stdlib.

A library prints nothing of its own on stdout, yet structlog's defaults write
every level there. So until the application calls ``structlog.configure`` (the
command line does: JSON lines on stderr), a library logger hands its events to
the standard :mod:`logging` logger of the same name, where the application's
logging configuration decides: with none, the info and debug lines are dropped
and warnings go to stderr (``logging.lastResort``).

structlog is imported when a logger is asked for, not with this module, so a
module that logs only on a rare path (a retried append) does not load it.
"""

from __future__ import annotations

from typing import Any


def library_logger(name: str) -> Any:
    """Return the logger ``name`` of the library, bound to nothing yet.

    Args:
        name: The logger's name (``turnledger.<part>``); the stdlib logger of
            that name receives the events while structlog is not configured.

    Returns:
        structlog's logger when the application configured structlog, else a
        structlog logger writing ``event='...' key=value ...`` messages to the
        stdlib logger ``name`` (events below its effective level are dropped
        before they are rendered); context variables bound with
        ``structlog.contextvars`` are included either way.
    """
    import logging  # noqa: PLC0415 - loaded with the first logger, see the module

    import structlog  # noqa: PLC0415 - idem

    if structlog.is_configured():
        return structlog.get_logger(name)
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            structlog.processors.KeyValueRenderer(key_order=["event"]),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
