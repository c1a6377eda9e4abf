"""`SubAgentTool`: an agent another agent calls as a tool (a hand-off), with a spawned blackboard."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from toolweave.agent._process import current_process
from toolweave.exceptions import UserError
from toolweave.tools._context import LOOP_ID_KEY, ToolCallContext
from toolweave.tools._definition import ToolDefinition
from toolweave.tools._result import ToolResult
from toolweave.tools._tool import Tool, ToolArguments, load_arguments

if TYPE_CHECKING:
    from toolweave.agent._agent import Agent

__all__ = ('SubAgentTool',)

MAX_DEPTH = 8
"""How deeply sub-agents may nest; a deeper call fails (this stops an agent that calls itself for ever)."""

_PROMPT_SCHEMA: dict[str, Any] = {
    'type': 'object',
    'properties': {'prompt': {'type': 'string', 'description': 'The task for the agent, in plain language.'}},
    'required': ['prompt'],
    'additionalProperties': False,
}


class SubAgentTool(Tool):
    """Runs an `Agent` as a tool: the model of the calling agent sees one tool; calling it runs the whole
    sub-agent loop and returns its final answer.

    - Input: with `input_type` (a pydantic model), the tool's schema is that model's JSON schema; the call's
      arguments are validated into an instance (every problem reported to the model), which is put on the
      sub-agent's blackboard under the name `input`, and the prompt is `prompt(instance)` or, by default, the
      instance as JSON. Without `input_type` the schema is one string field, `prompt`.
    - Blackboard: the sub-agent gets a blackboard spawned from the caller's process. It sees the caller's
      objects (live); what it adds (its `input` included) is published to the caller's blackboard when the
      sub-agent run ends, whatever its outcome. Called outside an agent run, it starts with a fresh blackboard.
    - Context: the call's context reaches the sub-agent run as its run context (a new loop id replaces the
      caller's); the sub-agent's own `context` sits below it.
    - Usage: the sub-agent's LLM calls, tokens and tool calls are added to the caller's usage when it ends.
    - Nesting: at most `MAX_DEPTH` (8) levels; a deeper call fails without running.
    - Failures (a sub-agent budget, a model error) become a failure result the calling model can read;
      `ExitEarly` and `ToolConfigurationError` propagate.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        description: str | None = None,
        input_type: type[BaseModel] | None = None,
        prompt: Callable[[Any], str] | None = None,
    ) -> None:
        if input_type is not None and not (isinstance(input_type, type) and issubclass(input_type, BaseModel)):
            raise UserError(f'input_type of sub-agent tool {name or agent.name!r} must be a pydantic BaseModel '
                            f'subclass, got {input_type!r}.')
        if prompt is not None and input_type is None:
            raise UserError(f'Sub-agent tool {name or agent.name!r}: `prompt` formats an `input_type` instance; '
                            'pass `input_type=` too, or leave `prompt` out.')
        self.agent = agent
        self.input_type = input_type
        self.prompt = prompt
        parameters = _clean_schema(input_type.model_json_schema()) if input_type is not None else _PROMPT_SCHEMA
        default = agent.description or f'Hand a task to the {agent.name!r} agent and get its final answer.'
        self._definition = ToolDefinition(name or agent.name, description or default, parameters)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        data = load_arguments(arguments, self.name)
        inputs: list[tuple[object, str | None]] = []
        if self.input_type is None:
            prompt = data.get('prompt')
            if not isinstance(prompt, str) or not prompt.strip():
                return ToolResult.failure(f'Tool {self.name!r} needs a non-empty string argument `prompt`, got '
                                          f'{data!r}. Send {{"prompt": "the task"}}.')
            text = prompt
        else:
            try:
                value = self.input_type.model_validate(data)
            except ValidationError as exc:
                problems = '; '.join(f'{".".join(map(str, e["loc"])) or "(root)"}: {e["msg"]}' for e in exc.errors())
                return ToolResult.failure(f'Invalid arguments for tool {self.name!r}: {problems}')
            inputs.append((value, 'input'))
            text = self.prompt(value) if self.prompt is not None else value.model_dump_json()
        parent = current_process()
        if parent is not None and parent.depth + 1 > MAX_DEPTH:
            return ToolResult.failure(f'Sub-agent {self.name!r} not started: sub-agents are nested more than '
                                      f'{MAX_DEPTH} levels deep (an agent probably calls itself). Answer with what '
                                      'you have.')
        run_context = {key: value for key, value in context.items() if key != LOOP_ID_KEY}
        result = await self.agent._run(text, context=run_context, parent=parent, inputs=inputs)
        return ToolResult.success(result.output)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema without pydantic's `title` noise (a property named `title` is kept)."""

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: clean(value) for key, value in node.items() if not (key == 'title' and isinstance(value, str))}
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    cleaned.setdefault('additionalProperties', False)
    return cleaned
