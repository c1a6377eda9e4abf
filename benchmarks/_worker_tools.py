"""Tools for the worker tests and the scale-out benchmark, imported by `toolweave worker --tools
benchmarks._worker_tools:TOOLS` in worker processes.

Each tool writes a side-effect ledger (the file named by `TOOLWEAVE_LEDGER`): `S <step> <pid>` when it starts and
`E <step> <pid>` when its effect is done, so a test can tell which process ran what, and how many times. Each
waits `TOOLWEAVE_TOOL_SECONDS` (default 0.01) between the two, as a tool waiting on a service would.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from toolweave import Tool, tool

__all__ = ('PLAN_WIDTH', 'TOOLS', 'WITHOUT_LOOKUP', 'ledger_lines', 'plan')

PLAN_WIDTH = 100
"""Chains in `plan(n)`: step `i` reads step `i - PLAN_WIDTH`."""


def _write(line: str) -> None:
    path = os.environ.get('TOOLWEAVE_LEDGER')
    if path:  # one write of one short line to a file opened for appending: lines from processes never interleave
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f'{line} {os.getpid()}\n'.encode())
        finally:
            os.close(fd)


async def _work(step: str) -> dict[str, Any]:
    _write(f'S {step}')
    await anyio.sleep(float(os.environ.get('TOOLWEAVE_TOOL_SECONDS', '0.01')))
    _write(f'E {step}')
    return {'step': step, 'pid': os.getpid()}


@tool
async def effect(step: str, after: Any = None) -> dict[str, Any]:
    """Do something that must happen once (a side effect)."""
    return await _work(step)


@tool
async def lookup(step: str, after: Any = None) -> dict[str, Any]:
    """Read something (safe to repeat)."""
    return await _work(step)


lookup = lookup.with_definition(lookup.definition.with_metadata(read_only=True))
TOOLS: list[Tool] = [effect, lookup]
WITHOUT_LOOKUP: list[Tool] = [effect]


def plan(steps: int) -> dict[str, Any]:
    """`steps` steps in `PLAN_WIDTH` chains; every third calls `lookup` (read-only), the others `effect`."""
    return {'steps': [
        {'id': f's{i}', 'tool': 'lookup' if i % 3 == 0 else 'effect',
         'arguments': {'step': f's{i}', **({'after': f'$ref:s{i - PLAN_WIDTH}.step'} if i >= PLAN_WIDTH else {})}}
        for i in range(steps)]}


def ledger_lines(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """`(kind, step, pid)` per ledger line (`S`: started, `E`: effect done)."""
    try:
        with open(path, encoding='utf-8') as ledger:
            text = ledger.read()
    except FileNotFoundError:
        return []
    return [(kind, step, int(pid)) for kind, step, pid in (line.split() for line in text.splitlines())]
