"""Serving the web app: uvicorn with bounds against slow and numerous clients.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``
seconds, but a connection that sends part of a request and then nothing
(slowloris) is never timed out: its keep-alive timer is cancelled by the first
byte received and none is armed while the request is incomplete. Hence
:class:`BoundedH11Protocol`: each request's headers must be complete within
:data:`HEADER_TIMEOUT` seconds of the connection opening (or of the previous
response), however the bytes trickle in; and a connection beyond
:data:`MAX_CONNECTIONS` is closed as soon as it is accepted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from turnledger.pipeline.web.app import ASGIApp

HEADER_TIMEOUT: Final = 10.0
"""Seconds a connection has to send a request's complete headers."""

KEEP_ALIVE_TIMEOUT: Final = 5
"""Seconds an idle keep-alive connection stays open after a response."""

MAX_CONNECTIONS: Final = 256
"""The most connections served at once; one more is closed when accepted (and
uvicorn answers 503 to a request while this many are open)."""


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for request headers and a cap.

    The deadline is armed when the connection opens and after each response, is
    not moved by data arriving, and is cancelled once h11 has a request's
    headers; when it fires the connection is closed (a body, or the app's
    answer, may take longer).
    """

    header_timeout: float = HEADER_TIMEOUT

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Register the connection; close it at once when over the cap."""
        super().connection_made(transport)
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) > limit:
            transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline, then let uvicorn clean up."""
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Process received data; a complete request's headers stop the deadline."""
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        """Give the next request on this connection its own deadline."""
        self._arm()
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def server_config(app: ASGIApp) -> uvicorn.Config:
    """Return the uvicorn configuration ``turnledger serve`` runs ``app`` with.

    Quiet (warnings only, no access log), no websockets or lifespan, the h11
    protocol bounded by :class:`BoundedH11Protocol`, keep-alive
    :data:`KEEP_ALIVE_TIMEOUT` and at most :data:`MAX_CONNECTIONS` connections.
    """
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        ws="none",
        lifespan="off",
        http=BoundedH11Protocol,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        limit_concurrency=MAX_CONNECTIONS,
    )
