"""Model strings: `'openai:gpt-4o-mini'`, `'anthropic:claude-sonnet-4-5'`, `'ollama:qwen2.5'`, ..."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from toolweave.exceptions import UserError
from toolweave.models._base import Model

__all__ = ('KNOWN_PROVIDERS', 'infer_model')


@dataclass(frozen=True, slots=True)
class _LocalServer:
    """An OpenAI-compatible server that usually runs on this machine."""

    default_url: str
    url_env: str
    api_key: str | None
    """The key to send when none is configured; `None` reads `OPENAI_API_KEY` (servers that check keys)."""


_LOCAL_SERVERS = {
    'ollama': _LocalServer('http://localhost:11434/v1', 'OLLAMA_BASE_URL', 'ollama'),
    'vllm': _LocalServer('http://localhost:8000/v1', 'VLLM_BASE_URL', None),
    'llamacpp': _LocalServer('http://localhost:8080/v1', 'LLAMACPP_BASE_URL', None),
}

KNOWN_PROVIDERS = ('openai', 'anthropic', 'ollama', 'vllm', 'llamacpp', 'openai-compatible')
"""The prefixes `infer_model` understands, in the order error messages list them."""

_EXAMPLES = (
    "'openai:gpt-4o-mini', 'anthropic:claude-sonnet-4-5', 'ollama:qwen2.5', "
    "'openai-compatible:my-model@http://localhost:8000/v1'"
)
_COMPATIBLE = re.compile(r'(?P<model>.+?)@(?P<url>https?://\S+)')


def infer_model(model: Model | str) -> Model:
    """Return `model` itself if it is a `Model`, else build the adapter a model string names.

    | string | adapter |
    | --- | --- |
    | `openai:<model>` | `OpenAIChatModel`, key from `OPENAI_API_KEY` |
    | `anthropic:<model>` | `AnthropicModel`, key from `ANTHROPIC_API_KEY` |
    | `ollama:<model>` | `OpenAIChatModel` at `http://localhost:11434/v1` (override with `OLLAMA_BASE_URL`) |
    | `vllm:<model>` | `OpenAIChatModel` at `http://localhost:8000/v1` (`VLLM_BASE_URL`) |
    | `llamacpp:<model>` | `OpenAIChatModel` at `http://localhost:8080/v1` (`LLAMACPP_BASE_URL`) |
    | `openai-compatible:<model>@<base_url>` | `OpenAIChatModel` at `base_url` |

    Example:
        ```python
        from toolweave.models import infer_model

        print(infer_model('ollama:qwen2.5').name)
        #> ollama:qwen2.5
        ```

    Raises:
        UserError: the string has no provider prefix, an unknown one, or no model name.
        ImportError: the provider's SDK is not installed (the message says which extra to install).
    """
    if isinstance(model, Model):
        return model
    if not isinstance(model, str):
        raise UserError(
            f'A model must be a `Model` or a model string such as {_EXAMPLES}; got {type(model).__name__} {model!r}.'
        )
    provider, sep, name = model.strip().partition(':')
    provider = provider.lower()
    if not sep:
        guess = 'anthropic' if model.startswith('claude') else 'openai'
        raise UserError(
            f'Model string {model!r} has no provider prefix. Write it as `<provider>:<model>`, for example '
            f'{guess + ":" + model.strip()!r}. Known providers: {", ".join(KNOWN_PROVIDERS)}.'
        )
    if provider not in KNOWN_PROVIDERS:
        raise UserError(
            f'Unknown model provider {provider!r} in model string {model!r}. '
            f'Known providers: {", ".join(KNOWN_PROVIDERS)} (for example {_EXAMPLES}).'
        )
    name = name.strip()
    if not name:
        raise UserError(f'Model string {model!r} names no model after {provider + ":"!r}; for example {_EXAMPLES}.')
    if provider == 'anthropic':
        from toolweave.models._anthropic import AnthropicModel

        return AnthropicModel(name)

    from toolweave.models._openai import OpenAIChatModel

    if provider == 'openai':
        return OpenAIChatModel(name)
    if provider == 'openai-compatible':
        match = _COMPATIBLE.fullmatch(name)
        if match is None:
            raise UserError(
                f'Model string {model!r} needs a base URL: write `openai-compatible:<model>@<base_url>`, for example '
                "'openai-compatible:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1'."
            )
        return OpenAIChatModel(match['model'], base_url=match['url'], provider=provider)
    server = _LOCAL_SERVERS[provider]
    base_url = os.environ.get(server.url_env) or server.default_url
    return OpenAIChatModel(
        name,
        base_url=base_url,
        api_key=server.api_key,
        provider=provider,
        api_key_env=None if server.api_key else 'OPENAI_API_KEY',
    )
