"""Model strings -> adapters, and the error for every string `infer_model` cannot use."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest

from toolweave import ToolDefinition, UserError
from toolweave.models import (
    KNOWN_PROVIDERS,
    AnthropicModel,
    Message,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    UserMessage,
    infer_model,
)

from .conftest import LocalServer, Replay, load_cassette

pytestmark = pytest.mark.anyio


def test_openai() -> None:
    model = infer_model('openai:gpt-4o-mini')
    assert isinstance(model, OpenAIChatModel)
    assert model.name == 'openai:gpt-4o-mini'
    assert model.model_name == 'gpt-4o-mini'
    assert model.base_url == 'https://api.openai.com/v1'
    assert model.api_key_env == 'OPENAI_API_KEY'


def test_anthropic() -> None:
    model = infer_model('anthropic:claude-sonnet-4-5')
    assert isinstance(model, AnthropicModel)
    assert model.name == 'anthropic:claude-sonnet-4-5'
    assert model.base_url == 'https://api.anthropic.com'


def test_ollama_default_and_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    model = infer_model('ollama:qwen2.5')
    assert isinstance(model, OpenAIChatModel)
    assert (model.name, model.model_name, model.base_url) == ('ollama:qwen2.5', 'qwen2.5', 'http://localhost:11434/v1')
    assert model.api_key_env is None  # Ollama needs no key, so a 401 never blames OPENAI_API_KEY

    monkeypatch.setenv('OLLAMA_BASE_URL', 'http://gpu-box:11434/v1')
    tagged = infer_model('ollama:llama3.2:3b')
    assert isinstance(tagged, OpenAIChatModel)
    assert tagged.base_url == 'http://gpu-box:11434/v1'
    # Ollama tags contain a colon; only the first one separates the provider.
    assert tagged.model_name == 'llama3.2:3b'


@pytest.mark.parametrize(
    ('string', 'env', 'url'),
    [
        ('vllm:Qwen/Qwen2.5-7B-Instruct', 'VLLM_BASE_URL', 'http://localhost:8000/v1'),
        ('llamacpp:local', 'LLAMACPP_BASE_URL', 'http://localhost:8080/v1'),
    ],
)
def test_local_servers(string: str, env: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = infer_model(string)
    assert isinstance(model, OpenAIChatModel)
    assert model.base_url == url
    monkeypatch.setenv(env, 'http://elsewhere:1234/v1')
    overridden = infer_model(string)
    assert isinstance(overridden, OpenAIChatModel)
    assert overridden.base_url == 'http://elsewhere:1234/v1'


@pytest.mark.parametrize(
    ('string', 'name', 'url'),
    [
        ('openai-compatible:my-model@http://localhost:8000/v1', 'my-model', 'http://localhost:8000/v1'),
        ('openai-compatible:org/model@v2@https://llm.example.com/v1', 'org/model@v2', 'https://llm.example.com/v1'),
        ('OpenAI-Compatible:m@https://user@host.example/v1', 'm', 'https://user@host.example/v1'),
    ],
)
def test_openai_compatible(string: str, name: str, url: str) -> None:
    model = infer_model(string)
    assert isinstance(model, OpenAIChatModel)
    assert (model.model_name, model.base_url) == (name, url)
    assert model.name == f'openai-compatible:{name}'


async def test_inferred_ollama_model_talks_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The string form is a real, working adapter: point it at a replayed server.
    replay = Replay([load_cassette('openai_text.json')['interactions'][0]['response']])
    model = infer_model('ollama:qwen2.5')
    assert isinstance(model, OpenAIChatModel)
    model = OpenAIChatModel(
        model.model_name,
        base_url=model.base_url,
        provider=model.provider,
        api_key='ollama',
        api_key_env=model.api_key_env,
        http_client=replay.httpx2_client(),
    )
    response = await model.respond([UserMessage('hi')], [])
    assert response.text == 'Hello!'
    assert replay.sent[0].headers['host'] == 'localhost:11434'
    assert replay.sent[0].body['model'] == 'qwen2.5'


class EchoModel:
    """A hand-written model: anything with `name` and `respond` is a `Model`."""

    @property
    def name(self) -> str:
        return 'echo'

    async def respond(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], settings: ModelSettings | None = None
    ) -> ModelResponse:
        return ModelResponse(text='echo')


def test_a_model_instance_passes_through() -> None:
    for model in (OpenAIChatModel('gpt-4o-mini'), EchoModel()):
        assert infer_model(model) is model


@pytest.mark.parametrize(
    ('value', 'fragments'),
    [
        ('gpt-4o', ['no provider prefix', "'openai:gpt-4o'", 'Known providers: openai, anthropic, ollama']),
        ('claude-sonnet-4-5', ["'anthropic:claude-sonnet-4-5'"]),
        (
            'gemini:gemini-2.0',
            ["Unknown model provider 'gemini'", 'Known providers: openai, anthropic', 'ollama:qwen2.5'],
        ),
        ('openai:', ['names no model', "'openai:'"]),
        ('ollama:   ', ['names no model']),
        ('', ['no provider prefix']),
        ('openai-compatible:my-model', ['needs a base URL', 'openai-compatible:<model>@<base_url>']),
        ('openai-compatible:my-model@localhost:8000', ['needs a base URL']),
        (42, ['must be a `Model` or a model string', 'int 42']),
        (None, ['NoneType None']),
    ],
)
def test_bad_model_strings(value: object, fragments: list[str]) -> None:
    with pytest.raises(UserError) as info:
        infer_model(value)  # type: ignore[arg-type]
    for fragment in fragments:
        assert fragment in str(info.value)


def test_every_known_provider_is_listed_and_works() -> None:
    assert KNOWN_PROVIDERS == ('openai', 'anthropic', 'ollama', 'vllm', 'llamacpp', 'openai-compatible')
    for provider in KNOWN_PROVIDERS:
        suffix = 'm@http://h/v1' if provider == 'openai-compatible' else 'm'
        assert infer_model(f'{provider}:{suffix}').name == f'{provider}:m'


@pytest.mark.parametrize(
    ('package', 'module', 'string'),
    [
        ('openai', 'toolweave.models._openai', 'openai:gpt-4o-mini'),
        ('anthropic', 'toolweave.models._anthropic', 'anthropic:m'),
    ],
)
def test_missing_sdk_says_what_to_install(
    package: str, module: str, string: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `None` in sys.modules makes `import openai` fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.delitem(sys.modules, module)
    with pytest.raises(ImportError, match=rf'pip install "toolweave\[{package}\]"'):
        infer_model(string)


@pytest.mark.usefixtures('allow_model_requests')
async def test_inferred_models_over_real_sockets(local_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # No mock transport: the adapters' own SDK clients talk HTTP to a server on 127.0.0.1.
    openai_reply = load_cassette('openai_text.json')['interactions'][0]['response']
    anthropic_reply = load_cassette('anthropic_text.json')['interactions'][0]['response']
    local_server.replay.replies += [openai_reply, openai_reply, anthropic_reply]
    monkeypatch.setenv('OLLAMA_BASE_URL', f'{local_server.base_url}/v1')

    # `infer_model` is typed to return a `Model`, which has no `async with`; both strings give the chat adapter.
    ollama = infer_model('ollama:qwen2.5')
    assert isinstance(ollama, OpenAIChatModel)
    async with ollama:
        assert (await ollama.respond([UserMessage('hi')], [])).text == 'Hello!'
    compatible = infer_model(f'openai-compatible:served-model@{local_server.base_url}/v1')
    assert isinstance(compatible, OpenAIChatModel)
    async with compatible:
        assert (await compatible.respond([UserMessage('hi')], [])).text == 'Hello!'
    async with AnthropicModel('claude-sonnet-4-6', api_key='sk-ant-local', base_url=local_server.base_url) as claude:
        assert (await claude.respond([UserMessage('hi')], [])).text == 'Hello!'

    first, second, third = local_server.replay.sent
    assert (first.path, first.body['model'], first.headers['authorization']) == (
        '/v1/chat/completions',
        'qwen2.5',
        'Bearer ollama',
    )
    assert (second.body['model'], second.headers['authorization']) == ('served-model', 'Bearer not-needed')
    assert (third.path, third.body['model']) == ('/v1/messages', 'claude-sonnet-4-6')


async def test_the_same_server_is_blocked_when_requests_are_off(local_server: LocalServer) -> None:
    model = infer_model(f'openai-compatible:m@{local_server.base_url}/v1')
    with pytest.raises(RuntimeError, match='Real model requests are blocked'):
        await model.respond([UserMessage('hi')], [])
    assert local_server.replay.sent == []
