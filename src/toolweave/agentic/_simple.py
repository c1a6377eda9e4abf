"""`SimpleAgenticTool`: a tool whose call runs an inner agent loop over its sub-tools, all available at once."""

from __future__ import annotations

from toolweave.agent import current_process
from toolweave.agentic._base import (
    NO_PROCESS,
    ToolListAgenticTool,
    TrackingTool,
    check_unique,
    default_system_prompt,
    object_tools,
    resolve_tools,
)
from toolweave.tools import Tool, ToolArguments, ToolCallContext, ToolResult, ToolsetItem

__all__ = ('SimpleAgenticTool',)


class SimpleAgenticTool(ToolListAgenticTool):
    """An agentic tool whose sub-tools are all available from the start: the inner model uses them freely.

    The result is the inner model's final answer. Artifacts (structured values) the sub-tools return are
    packaged with it: none gives a text result, one gives a result whose `value` is that object, more
    give the list. Collections are unpacked element by element. See `AgenticTool` for the model, process,
    input and context rules.

    ```python
    from toolweave import Agent, Parameter, SimpleAgenticTool, tool
    from toolweave.testing import ScriptedModel

    @tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    inner = ScriptedModel([{'tool': 'add', 'arguments': {'a': 5, 'b': 6}}, 'It is 11.'])
    math = (SimpleAgenticTool('math', 'Does arithmetic', model=inner).with_tools(add)
            .with_parameter(Parameter.string('expression', 'What to compute')))
    outer = ScriptedModel([{'tool': 'math', 'arguments': {'expression': '5 + 6'}}, 'Done: 11.'])
    print(Agent(outer, tools=[math]).run_sync('What is 5 + 6?').output)
    #> Done: 11.
    ```
    """

    kind = 'SimpleAgenticTool'

    def with_tools(self, *tools: ToolsetItem) -> SimpleAgenticTool:
        """A copy with more sub-tools (tools, functions or objects with `@tool` methods)."""
        added = (*self.tools, *resolve_tools(tools, f'with_tools of SimpleAgenticTool {self.name!r}'))
        check_unique(added, f'SimpleAgenticTool {self.name!r}')
        return self._copy(tools=added)

    def with_tool_object(self, obj: object) -> SimpleAgenticTool:
        """A copy with the tools `obj` stands for as sub-tools; an object with none is ignored."""
        return self.with_tool_objects(obj)

    def with_tool_objects(self, *objects: object) -> SimpleAgenticTool:
        """A copy with the `@tool` methods of each object as sub-tools; objects without any are ignored."""
        added = (*self.tools, *object_tools(objects))
        check_unique(added, f'SimpleAgenticTool {self.name!r}')
        return self._copy(tools=added)

    async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
        if not self.tools and not self.has_tool_chaining:  # chaining alone is enough to go on
            return ToolResult.failure('No tools available for SimpleAgenticTool')
        process = current_process()
        if process is None:
            return ToolResult.failure(NO_PROCESS)
        text = self.input_text(arguments)
        if isinstance(text, ToolResult):
            return text
        state = self.new_state(unpack_collections=True)
        tools: list[Tool] = [TrackingTool(tool, state) for tool in self.tools]
        tools.extend(self.placeholders(state))
        instructions = self.make_prompt(process, text, default_system_prompt(self.description))
        result = await self.run_inner(context, tools, instructions, text, state)
        return state.package(result.output)
