"""The one place toolweave turns values into JSON text and JSON text into objects."""

from __future__ import annotations

import json
from typing import Any

__all__ = ('compact', 'loads_object')


def compact(value: Any) -> str:
    """`value` as compact JSON text (no spaces, non-ASCII kept); values JSON cannot hold are written with `str`.

    ```python
    print(compact({'a': [1, 2], 'b': 'é'}))
    #> {"a":[1,2],"b":"é"}
    ```
    """
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False, default=str)


def loads_object(text: str) -> dict[str, Any] | None:
    """`text` parsed as a JSON object, or `None` for blank text, invalid JSON or any other JSON value."""
    if not text.strip():
        return None
    try:
        loaded = json.loads(text)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None
