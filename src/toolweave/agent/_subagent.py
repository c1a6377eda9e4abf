"""`SubAgentTool`: an agent another agent calls as a tool (a hand-off), with a spawned blackboard."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field

from toolweave.exceptions import UserError
from toolweave.tools import ArgumentsError, Tool, ToolArguments, ToolCallContext, ToolDefinition, ToolResult
from toolweave.tools._schema import ArgumentsValidator

if TYPE_CHECKING:
    from toolweave.agent._agent import Agent

__all__ = ('SubAgentTool',)


class _Task(BaseModel):
    """The input of a sub-agent tool without an `input_type`."""

    prompt: Annotated[str, Field(min_length=1, pattern=r'\S', description='The task for the agent, in plain language.')]


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
    - Usage and budget: the sub-agent's run is part of the caller's (see `Agent.run`): its LLM calls, tokens and
      tool calls count in the caller's usage and against the caller's budget as they happen.
    - Nesting: runs nest at most `MAX_DEPTH` (8) levels deep; a deeper call fails without running.
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
        self._validator = ArgumentsValidator(input_type or _Task, parameters)
        default = agent.description or f'Hand a task to the {agent.name!r} agent and get its final answer.'
        self._definition = ToolDefinition(name or agent.name, description or default, parameters)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        try:
            value = self._validator.validate(arguments, self.name)
        except ArgumentsError as exc:
            return ToolResult.failure(str(exc))
        if isinstance(value, _Task):
            result = await self.agent.run(value.prompt, context=context)
        else:
            text = self.prompt(value) if self.prompt is not None else value.model_dump_json()
            result = await self.agent.run(text, context=context, objects={'input': value})
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
