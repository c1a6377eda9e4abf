"""`toolweave chat`: talk to a real model with your tools, one prompt per line of stdin (Ctrl-D ends). Replies are
printed as they stream."""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.text import Text

from toolweave.agent import (
    Agent,
    AgentEvent,
    AgentRunResult,
    EmptyAnswer,
    MessageEvent,
    PlanStepFinished,
    ProgressEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toolweave.cli._app import app
from toolweave.cli._common import TOOLS_HELP, ExitCode, load_object, load_tools
from toolweave.exceptions import RunError, ToolweaveError, UserError
from toolweave.models import KNOWN_PROVIDERS, AssistantMessage, Message, Model, infer_model

__all__ = ('chat_command', 'chat_session')

_PREVIEW = 160
OPENAI_API = 'https://api.openai.com/v1'
"""The one OpenAI-compatible server that needs a key; local ones (ollama, llama.cpp, vLLM) take any."""


@app.command('chat')
def chat_command(
    model: Annotated[
        str,
        typer.Option('--model', '-m', metavar='PROVIDER:MODEL',
                     help="A model string ('openai:gpt-4o-mini', 'anthropic:claude-sonnet-4-5', 'ollama:qwen2.5', "
                          "'openai-compatible:NAME@URL') or MODULE:ATTRIBUTE of a Model instance.",
                     show_default=False),
    ],
    tools: Annotated[
        str | None,
        typer.Option('--tools', '-t', metavar='MODULE:ATTRIBUTE', help=TOOLS_HELP, show_default=False),
    ] = None,
    plan: Annotated[bool, typer.Option('--plan', help='Offer execute_tool_plan (tool planning).')] = False,
    instructions: Annotated[str, typer.Option('--instructions', help='The system prompt.')] = (
        'You are a helpful assistant. Use the tools when they help.'),
    max_iterations: Annotated[int, typer.Option('--max-iterations', min=1, help='Model calls per prompt.')] = 20,
) -> None:
    """Chat with a real model and your tools; replies stream as the model writes them.

    Each line of stdin is a prompt; tool calls and plan steps are shown as they run. The conversation carries over
    between prompts. Ctrl-D (end of input) ends the chat.
    """
    loaded = _load_model(model)
    missing = None if _names_an_object(model) else _missing_credentials(loaded)
    if missing is not None:
        typer.echo(f'toolweave chat: {missing}', err=True)
        raise typer.Exit(ExitCode.USAGE)
    agent = Agent(loaded, instructions=instructions, tools=() if tools is None else load_tools(tools),
                  tool_planning=plan, max_iterations=max_iterations, name='chat')
    console = Console(highlight=False)
    try:
        runs, failed = anyio.run(partial(_session, agent, console=console))
    except KeyboardInterrupt:
        console.print(Text('\ninterrupted', style='dim'))
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if failed and not runs:  # not one prompt got an answer: say so with the exit status too
        raise typer.Exit(ExitCode.FAILED)


def _names_an_object(spec: str) -> bool:
    """Whether `--model` names a Model object (`module:ATTRIBUTE`, `path/to/file.py:ATTRIBUTE`), not a provider's
    model (`openai:gpt-4o-mini`)."""
    module, sep, attribute = spec.partition(':')
    if not sep or module in KNOWN_PROVIDERS:
        return False
    dotted = all(part.isidentifier() for part in [*module.split('.'), *attribute.split('.')])
    return module.endswith('.py') or '/' in module or dotted


def _provider_problem(spec: str) -> str:
    try:
        infer_model(spec)
    except (UserError, ImportError) as exc:
        return str(exc)
    return f'{spec!r} is not a provider model.'  # pragma: no cover - only specs infer_model refuses get here


def _missing_credentials(model: Model) -> str | None:
    """What is missing, before the first prompt, when a provider's model has no API key to send: the environment
    variable to set. Local servers (`ollama:`, `openai-compatible:`) need none."""
    from toolweave.models import AnthropicModel, OpenAIChatModel

    if isinstance(model, OpenAIChatModel):
        needs_key = model.base_url == OPENAI_API and model.api_key_env is not None
        if needs_key and not os.environ.get(model.api_key_env or ''):
            return (f'no API key for {model.name}: set the {model.api_key_env} environment variable (export '
                    f'{model.api_key_env}=...), or use a local model such as --model ollama:qwen2.5.')
    elif isinstance(model, AnthropicModel):
        import anthropic

        client = anthropic.AsyncAnthropic()  # reads the environment and the SDK's credential files; sends nothing
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            return (f'no API key for {model.name}: set the ANTHROPIC_API_KEY environment variable (export '
                    'ANTHROPIC_API_KEY=...).')
    return None


def _load_model(spec: str) -> Model:
    """A model string (`openai:gpt-4o-mini`) or, as `--tools` takes them, `module:ATTRIBUTE` or
    `path/to/file.py:ATTRIBUTE` naming a Model object."""
    if _names_an_object(spec):
        try:
            found = load_object(spec, option='--model')
        except typer.BadParameter as exc:
            if spec.partition(':')[0].endswith('.py'):
                raise
            raise typer.BadParameter(f'{_provider_problem(spec)} Nor is it a Model object: {exc.message}',
                                     param_hint='--model') from None
        if not isinstance(found, Model):
            raise typer.BadParameter(f'{spec!r} is a {type(found).__name__}, not a Model', param_hint='--model')
        return found
    try:
        return infer_model(spec)
    except UserError as exc:
        raise typer.BadParameter(f'{exc} Or give MODULE:ATTRIBUTE (or path/to/file.py:ATTRIBUTE) of a Model '
                                 'object.', param_hint='--model') from None
    except ImportError as exc:
        raise typer.BadParameter(str(exc), param_hint='--model') from None


async def chat_session(agent: Agent, *, console: Console) -> list[AgentRunResult]:
    """Read prompts from stdin until end of input; run each with the conversation so far; returns the runs."""
    runs, _ = await _session(agent, console=console)
    return runs


async def _session(agent: Agent, *, console: Console) -> tuple[list[AgentRunResult], int]:
    """The runs that answered, and how many prompts failed."""
    failed = 0
    interactive = sys.stdin.isatty()
    history: tuple[Message, ...] = ()
    runs: list[AgentRunResult] = []
    console.print(Text(f'{agent.model.name}, tools: {", ".join(d.name for d in agent.tool_definitions()) or "none"}'
                       f'. Ctrl-D ends.', style='dim'))
    while True:
        if interactive:
            console.print(Text('you> ', style='bold green'), end='')
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            break
        prompt = line.strip()
        if not prompt:
            continue
        printer = _ReplyPrinter(console)
        try:
            async with agent.run_stream(prompt, message_history=history) as stream:
                async for event in stream:
                    printer.show(event)
            result = stream.result
        except (RunError, ToolweaveError) as exc:
            printer.end_line()
            console.print(Text(f'error: {exc}', style='bold red'))
            failed += 1
            continue
        printer.end_line()
        history = result.messages
        runs.append(result)
        if result.finish_reason == 'empty_answer':
            console.print(Text('assistant gave no answer', style='bold red'))
        elif not printer.last_reply_streamed or result.finish_reason != 'final_answer':
            console.print(Text.assemble(('assistant> ', 'bold cyan'), result.output))
        usage = result.usage
        console.print(Text(f'  {usage.llm_calls} LLM calls, {usage.input_tokens:,} in / {usage.output_tokens:,} out '
                           f'tokens, {usage.tool_calls} tool calls, {result.process.duration or 0:.1f} s',
                           style='dim'))
    return runs, failed


class _ReplyPrinter:
    """Prints a run's events: reply text as it streams (after an `assistant> ` prompt), everything else on lines
    of its own."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.in_line = False
        """Whether streamed text left the cursor in the middle of a line."""
        self.streamed = False
        """Whether text of the current reply has been printed."""
        self.last_reply_streamed = False

    def show(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            if not self.in_line:
                self.console.print(Text('assistant> ', style='bold cyan'), end='')
                self.in_line = True
            self.console.print(Text(event.text), end='', soft_wrap=True)
            self.streamed = True
            return
        if isinstance(event, MessageEvent) and isinstance(event.message, AssistantMessage) and not event.persistent:
            self.last_reply_streamed, self.streamed = self.streamed, False  # one reply ended
        self.end_line()
        _show_event(self.console, event)

    def end_line(self) -> None:
        if self.in_line:
            self.console.print()
            self.in_line = False


def _show_event(console: Console, event: AgentEvent) -> None:
    if isinstance(event, EmptyAnswer):
        then = 'asking again' if event.nudged else 'giving up'
        cut = ' (cut at max_tokens)' if event.truncated else ''
        console.print(Text(f'  .. empty reply{cut}; {then}', style='dim'))
    elif isinstance(event, ToolCallStarted):
        console.print(Text(f'  -> {event.tool_name}({_cut(event.arguments)})', style='yellow'))
    elif isinstance(event, ToolCallFinished):
        style, text = ('green', event.result.output) if event.result.ok else ('red', event.result.text)
        console.print(Text(f'  <- {event.tool_name} {event.duration * 1000:.0f} ms: {_cut(text)}', style=style))
    elif isinstance(event, PlanStepFinished):
        step = event.step
        detail = step.error if step.error else step.output
        console.print(Text(f'     step {step.id} ({step.tool}) {step.status}: {_cut(detail or "")}', style='dim'))
    elif isinstance(event, ProgressEvent):
        console.print(Text(f'  .. {event.status}', style='dim'))
    elif isinstance(event, MessageEvent) and event.persistent:
        console.print(Text.assemble(('assistant (from a tool)> ', 'cyan'), event.message.content or ''))


def _cut(text: str) -> str:
    flat = ' '.join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 3] + '...'
