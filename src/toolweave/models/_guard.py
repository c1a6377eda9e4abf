"""The switch that blocks real model requests, so a test suite can never reach a provider by accident."""

from __future__ import annotations

__all__ = ('ALLOW_MODEL_REQUESTS', 'check_allow_model_requests')

ALLOW_MODEL_REQUESTS = True
"""Whether adapters may send requests to a real provider.

Set `toolweave.models.ALLOW_MODEL_REQUESTS = False` (for example in a `conftest.py` fixture) to make every adapter
that would reach the network raise `RuntimeError` instead. Adapters built with a custom `http_client=` or `client=`
(such as an `httpx2.MockTransport` replaying recorded payloads) are never blocked.
"""


def check_allow_model_requests(model_name: str) -> None:
    """Raise `RuntimeError` if real model requests are switched off.

    The flag is read from the public `toolweave.models` module, where users set it; re-exporting a `bool` copies
    it, so this module's own `ALLOW_MODEL_REQUESTS` only provides the default.
    """
    from toolweave import models

    if not getattr(models, 'ALLOW_MODEL_REQUESTS', ALLOW_MODEL_REQUESTS):
        raise RuntimeError(
            f'Real model requests are blocked, but model {model_name!r} tried to reach its provider. '
            'Set `toolweave.models.ALLOW_MODEL_REQUESTS = True` to allow them, or pass '
            '`http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))` to replay recorded responses.'
        )
