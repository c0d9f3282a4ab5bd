"""The ``turnledger serve`` application: wiring, safety checks, serving.

Stack: Starlette (routing, static files; a small, typed, well-kept ASGI toolkit
already in the dependency tree of the project's framework extras), Jinja2
templates with autoescaping on for every page (transcript content is untrusted
input), a little vanilla JavaScript served from ``static/`` (no build step, no
CDN, no framework download at run time) and uvicorn to serve. The pages render
on the server, so everything works without JavaScript except the scrubber and
the live view, which fetch JSON from the same app and put it in the page with
``textContent`` only.

Safety, on every response: a Content-Security-Policy allowing only the app's own
scripts, styles and images (no inline script runs, even if escaping failed);
``nosniff``; no framing; no referrer sent to other sites. On every request:
the ``Host`` header must name a loopback address (unless a token guards the
app; this stops DNS rebinding), and with a token (``--token`` or
``$TURNLEDGER_SERVE_TOKEN``) the request must carry it (``Authorization: Bearer``,
the ``turnledger_token`` cookie, or ``?token=`` once, which sets the cookie).
Writes (``--allow-writes``) are POSTs whose ``Origin`` must be the app itself.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from turnledger.ledger.errors import LedgerError, quote_value
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.web import api, is_loopback, pages
from turnledger.pipeline.web.state import WebSettings, WebState

TOKEN_COOKIE: Final = "turnledger_token"  # noqa: S105 - a cookie name, not a secret
"""The cookie the token is kept in after a ``?token=`` visit."""

HERE: Final = Path(__file__).resolve().parent

SECURITY_HEADERS: Final = (
    (
        b"content-security-policy",
        (
            b"default-src 'none'; script-src 'self'; style-src 'self'; "
            b"img-src 'self'; connect-src 'self'; form-action 'self'; "
            b"base-uri 'none'; frame-ancestors 'none'"
        ),
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """ASGI middleware: host and token checks, security headers on every answer."""

    def __init__(self, app: ASGIApp, settings: WebSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with the security headers added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
        }
        problem = self._problem(scope, headers)
        if problem is not None:
            status, text = problem
            response = PlainTextResponse(text, status_code=status)
            await response(scope, receive, self._secured(send, set_cookie=False))
            return
        token = self.settings.token
        fresh = bool(token) and _query_token(scope) == token
        await self.app(scope, receive, self._secured(send, set_cookie=fresh))

    def _problem(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        token = self.settings.token
        if not token:
            host = _host_name(headers.get("host", ""))
            if not is_loopback(host):
                return (
                    421,
                    f"Expected a loopback Host header, found {quote_value(host)}",
                )
            return None
        offered = [
            headers.get("authorization", "").removeprefix("Bearer ").strip(),
            _cookie(headers.get("cookie", ""), TOKEN_COOKIE),
            _query_token(scope),
        ]
        wanted = token.encode()
        if any(o and hmac.compare_digest(_raw(o), wanted) for o in offered):
            return None
        return 401, "Expected the access token (--token), found none that matches"

    def _secured(self, send: Send, *, set_cookie: bool) -> Send:
        token = self.settings.token

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *SECURITY_HEADERS]
                if set_cookie:
                    cookie = (
                        f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                    )
                    headers.append((b"set-cookie", cookie.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        return wrapped


def _raw(text: str) -> bytes:
    """Bytes to compare in constant time (any offered text, even non-ASCII)."""
    return text.encode("utf-8", "surrogatepass")


def _host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:80`` -> ``::1``)."""
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return name if rest == "" or rest.startswith(":") else header
    return header.rsplit(":", 1)[0]


def _query_token(scope: Scope) -> str:
    raw: bytes = scope.get("query_string", b"")
    query = parse_qs(raw.decode("latin-1"))
    return (query.get("token") or [""])[0]


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


async def _unavailable(request: Request, error: Exception) -> Response:
    """A ledger or shell error is one clean line (503), never a traceback."""
    del request
    detail = " ".join(str(error).split())
    return PlainTextResponse(f"The ledger cannot answer now: {detail}", 503)


def create_app(settings: WebSettings) -> ASGIApp:
    """Build the ASGI app over an open ledger.

    The sessions are listed once here (one pass over the ``session.opened``
    events), so the first page a browser asks for does not wait for that scan;
    later requests read only the events recorded since.
    """
    state = WebState(settings)
    state.cache.sessions()
    routes = [
        *pages.routes(state),
        *api.routes(state),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        Route("/healthz", lambda _request: PlainTextResponse("ok")),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={LedgerError: _unavailable, PipelineError: _unavailable},
    )
    return Guard(app, settings)
