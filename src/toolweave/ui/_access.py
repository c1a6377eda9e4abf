"""Who may reach the UI, decided before any web code is loaded: loopback binds, access tokens."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from toolweave.exceptions import UserError

__all__ = ('check_bind', 'is_loopback', 'parse_tokens')


def is_loopback(host: str) -> bool:
    """Whether binding to `host` serves this machine only."""
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host.strip('[]')).is_loopback
    except ValueError:
        return False


def parse_tokens(values: Iterable[str]) -> dict[str, str | None]:
    """Tokens given as `SECRET` or `LABEL=SECRET`: each secret and its label (`None`: the page's name is used).

    Raises:
        UserError: a secret shorter than 16 characters, or a label that is not a name.
    """
    tokens: dict[str, str | None] = {}
    for value in values:
        label, sep, secret = value.rpartition('=') if '=' in value else ('', '', value)
        label = label.strip() if sep else ''
        if len(secret) < 16:
            raise UserError(f'An access token must be at least 16 characters, got {len(secret)}. Make one with '
                            '`python -c "import secrets; print(secrets.token_urlsafe(24))"`.')
        if sep and not (0 < len(label) <= 64 and label.isprintable()):
            raise UserError(f'The label of an access token must be 1 to 64 printable characters, got {label!r}.')
        tokens[secret] = label or None
    return tokens


def check_bind(host: str, tokens: Mapping[str, str | None] | None) -> None:
    """Refuse to serve anything but the loopback interface without an access token.

    Raises:
        UserError: `host` is not a loopback address and no token is given.
    """
    if not tokens and not is_loopback(host):
        raise UserError(f'Refusing to serve the UI on {host!r} without an access token: anyone who can reach it could '
                        'approve tool calls. Give one with --token (or TOOLWEAVE_UI_TOKEN), or bind to 127.0.0.1.')
