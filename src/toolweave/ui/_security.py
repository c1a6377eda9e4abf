"""Who may use the UI, and the checks every request passes.

- **Host**: a request whose `Host` is not a name the server answers to is refused (a page elsewhere cannot reach
  the UI through DNS rebinding).
- **Access tokens**: required when the server binds to anything but the loopback interface (and optional on it).
  The person opens the address with `?token=SECRET` once: the server sets a session cookie (`HttpOnly`,
  `SameSite=Strict`) and sends them on without the token in the address. A script may send
  `Authorization: Bearer SECRET` instead. A token may carry a label (`ada=SECRET`): the decisions made with it
  are recorded as Ada's, whatever name the page gives.
- **Cross-site request forgery**: every state-changing request is a `POST` of JSON that carries the session's own
  token in `X-CSRF-Token` and an `Origin` that is the server's own; a bearer token (which a browser never sends
  by itself) stands for both.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request

__all__ = ('COOKIE', 'SESSION_SECONDS', 'Guard', 'Session')

COOKIE = 'toolweave_ui_session'
SESSION_SECONDS = 12 * 3600.0
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class Session:
    """One browser's session: its CSRF token and, if its access token had one, the label its decisions carry."""

    csrf: str
    user: str | None
    expires: float


@dataclass(slots=True)
class Guard:
    """The checks of the module docstring, for one server."""

    tokens: Mapping[str, str | None]
    """Secret -> label; empty: no token needed (loopback only)."""
    hosts: frozenset[str]
    """The host names the server answers to (`Host` without its port)."""
    sessions: dict[str, Session] = field(default_factory=dict[str, Session])

    def check_host(self, request: Request) -> None:
        host = request.headers.get('host', '')
        name = urlsplit(f'//{host}').hostname or ''
        if name not in self.hosts and f'[{name}]' not in self.hosts:
            raise HTTPException(421, f'This server does not answer to the host {host!r}. Open it as '
                                     f'{", ".join(sorted(self.hosts))} (or start it with --allow-host).')

    def session(self, request: Request) -> Session | None:
        sid = request.cookies.get(COOKIE)
        if sid is None:
            return None
        session = self.sessions.get(sid)
        if session is None or session.expires < time.time():
            return None
        return session

    def bearer(self, request: Request) -> tuple[bool, str | None]:
        """Whether the request carries a valid bearer token, and its label."""
        header = request.headers.get('authorization', '')
        scheme, _, secret = header.partition(' ')
        if scheme.lower() != 'bearer' or not secret:
            return False, None
        return self._match(secret.strip())

    def _match(self, secret: str) -> tuple[bool, str | None]:
        for known, label in self.tokens.items():
            if hmac.compare_digest(known.encode(), secret.encode()):
                return True, label
        return False, None

    def open_session(self, user: str | None) -> tuple[str, Session]:
        now = time.time()
        if len(self.sessions) >= MAX_SESSIONS:
            for sid in [sid for sid, s in self.sessions.items() if s.expires < now] or list(self.sessions)[:1000]:
                del self.sessions[sid]
        sid = secrets.token_urlsafe(32)
        session = self.sessions[sid] = Session(secrets.token_urlsafe(32), user, now + SESSION_SECONDS)
        return sid, session

    def token_in_query(self, request: Request) -> tuple[bool, str | None]:
        secret = request.query_params.get('token')
        return (False, None) if not secret else self._match(secret)

    def reader(self, request: Request) -> Session | None:
        """Check a request that reads: the host, and (when tokens are required) a session or a bearer token.
        Returns the session, if any."""
        self.check_host(request)
        session = self.session(request)
        if self.tokens and session is None and not self.bearer(request)[0]:
            raise HTTPException(401, 'This toolweave UI needs its access token: open the address `toolweave ui` '
                                     'printed (it ends in ?token=...), or send `Authorization: Bearer TOKEN`.')
        return session

    def writer(self, request: Request) -> str | None:
        """Check a request that changes something (see the module docstring). Returns the label decisions made by
        it carry when its token has one."""
        self.check_host(request)
        ok, label = self.bearer(request)
        if ok:
            return label
        session = self.session(request)
        if session is None:
            raise HTTPException(403, 'No session: reload the page (and open it with its ?token=... if it needs one).')
        if request.headers.get('content-type', '').split(';')[0].strip() != 'application/json':
            raise HTTPException(415, 'A change is sent as JSON (Content-Type: application/json).')
        origin = request.headers.get('origin')
        host = request.headers.get('host', '')
        if origin is None or origin not in (f'http://{host}', f'https://{host}'):
            raise HTTPException(403, f'Refused: this request comes from another site (Origin {origin!r}).')
        sent = request.headers.get('x-csrf-token', '')
        if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise HTTPException(403, "Refused: the request lacks this session's CSRF token. Reload the page.")
        return session.user
