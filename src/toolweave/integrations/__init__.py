"""toolweave inside the agent frameworks people already run, one module and one optional extra per framework.

- `toolweave.integrations.pydantic_ai` (`pip install "toolweave[pydantic-ai]"`): `ToolPlanning` (a capability
  that adds `execute_tool_plan` over an agent's own tools), `PlanToolset`, `ToolweaveToolset`, `toolweave_tools`.
- `toolweave.integrations.openai_agents` (`pip install "toolweave[openai-agents]"`): `plan_tool`,
  `function_tool`, `function_tools`, `toolweave_tool`.
- `toolweave.integrations.langgraph` (`pip install "toolweave[langgraph]"`): `plan_tool`, `langchain_tool`,
  `langchain_tools`, `toolweave_tool`.

Each module imports its framework when it is imported, never before: `import toolweave` loads none of them.
"""

from __future__ import annotations

__all__ = ()
