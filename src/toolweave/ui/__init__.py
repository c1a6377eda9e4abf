"""`toolweave ui`: a browser inbox for the decisions runs wait on, and a live view of every run in a plan store.

- `serve(store, host=..., port=..., tokens=..., tools=...)` serves it (uvicorn), on 127.0.0.1 unless told
  otherwise; any other address needs an access token.
- `create_app(store, ...)` is the same application as an ASGI app, for a server of your own.
- `check_bind(host, tokens)` and `parse_tokens(values)`: the access rules `serve` applies, for a server of your
  own.
- `BrowserReviewHandler()` is a reviewer that leaves the decision to a person in the UI: the step parks in the
  store, the inbox shows it, and the run goes on once it is decided.

Needs the `ui` extra: `pip install "toolweave[ui]"` (Starlette, uvicorn, sse-starlette).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolweave._public import present as _present
from toolweave.ui._access import check_bind, parse_tokens
from toolweave.ui._actions import BrowserReviewHandler

if TYPE_CHECKING:
    from toolweave.ui._app import create_app
    from toolweave.ui._serve import serve

__all__ = ('BrowserReviewHandler', 'check_bind', 'create_app', 'parse_tokens', 'serve')


def __getattr__(name: str) -> Any:
    # The web stack is imported on first use: `BrowserReviewHandler` needs none of it.
    if name in ('create_app', 'serve'):
        try:
            from toolweave.ui import _app, _serve
        except ImportError as e:
            raise ImportError('toolweave.ui needs Starlette, uvicorn and sse-starlette: '
                              '`pip install "toolweave[ui]"`.') from e
        return {'create_app': _app.create_app, 'serve': _serve.serve}[name]
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


_present('toolweave.ui', ('BrowserReviewHandler', 'check_bind', 'parse_tokens'), globals())
