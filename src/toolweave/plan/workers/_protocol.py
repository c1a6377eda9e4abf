"""What the coordinator and its workers agree on: the names in DBOS, the workflow ids, where the database is, and
how a step's outcome crosses between processes. Nothing here imports DBOS.

A step's call is one DBOS workflow, `toolweave.step(tool, arguments)`, enqueued on the worker queue under the id
`<run id>/<step id>`. Its outcome comes back as JSON data (`encode` / `decode`): a tool result, or *unknown*: the
workflow was recovered after its worker died while the tool ran, and the tool may not run twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from toolweave.exceptions import PlanStoreError, UserError
from toolweave.plan._options import DEFAULT_QUEUE
from toolweave.plan._record import jsonable
from toolweave.plan.durable._codec import when
from toolweave.plan.durable._postgres import PostgresStore
from toolweave.plan.durable._sqlite import SqliteStore
from toolweave.plan.durable._store import PlanStore
from toolweave.tools import Tool, ToolResult

__all__ = (
    'APP_NAME',
    'APP_VERSION',
    'DEFAULT_QUEUE',
    'STARTED_STEP',
    'STEP_WORKFLOW',
    'TERMINAL',
    'Unknown',
    'database_url',
    'decode',
    'encode',
    'encode_unknown',
    'import_dbos',
    'may_repeat',
    'parse_workflow_id',
    'workflow_id',
)

APP_NAME = 'toolweave'
"""The DBOS application the queue, the workflows and the client belong to."""
APP_VERSION = 'toolweave-steps-1'
"""The DBOS application version of every worker and every enqueued step: DBOS runs (and recovers) a workflow only
on executors of its version, so it names the version of this protocol, not of the package."""
STEP_WORKFLOW = 'toolweave.step'
STARTED_STEP = 'toolweave.started'
TERMINAL = ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')
"""DBOS statuses after which a workflow never runs again."""


def import_dbos() -> ModuleType:
    """The `dbos` module, or an `ImportError` that says how to get it."""
    try:
        import dbos
    except ImportError as e:
        raise ImportError('Running plan steps on workers needs DBOS: `pip install "toolweave[dbos]"`.') from e
    return dbos


def workflow_id(run_id: str, step_id: str, call: int = 0, attempt: int = 1) -> str:
    """The id of a step's call: `<run>/<step>`; a step's later calls (one per element of a list) add `/<n>`; a
    call run again after a person approved it (its worker died while it ran) adds `#<attempt>`."""
    base = f'{run_id}/{step_id}' if call == 0 else f'{run_id}/{step_id}/{call}'
    return base if attempt == 1 else f'{base}#{attempt}'


def parse_workflow_id(run_id: str, text: str) -> tuple[str, int] | None:
    """`(call id, attempt)` of a workflow id of run `run_id` (the call id is the id without the attempt), or `None`
    when it is not one."""
    prefix = f'{run_id}/'
    if not text.startswith(prefix):
        return None
    base, sep, attempt = text.partition('#')
    if not sep:
        return base, 1
    return (base, int(attempt)) if attempt.isdigit() and int(attempt) > 1 else None


def database_url(store: PlanStore | str | os.PathLike[str]) -> str:
    """The SQLAlchemy URL of the database a plan store (or its URL) lives in: DBOS keeps the queue there too.

    Raises:
        UserError: the store is not a SQLite or PostgreSQL store (another `PlanStore` has no database DBOS can use).
        PlanStoreError: the URL names no database (see `open_store` for the forms it takes).
    """
    if isinstance(store, SqliteStore):
        return f'sqlite:///{store.path.resolve()}'
    if isinstance(store, PostgresStore):
        text = store.conninfo
    elif isinstance(store, PlanStore):
        raise UserError(f'Plan steps run on workers only with a SqliteStore or a PostgresStore: the worker queue lives '
                        f'in the same database (DBOS), and {type(store).__name__} has none.')
    else:
        text = os.fspath(store)
    for scheme in ('postgresql+psycopg://', 'postgresql://', 'postgres://'):
        if text.startswith(scheme):
            return 'postgresql+psycopg://' + text[len(scheme):]
    if text.startswith('sqlite:'):
        path = text[len('sqlite:'):].partition('?')[0]
        if not path.startswith('///') or len(path) == 3:
            raise PlanStoreError(f'Cannot open plan store {text!r} for workers: write `sqlite:///relative/path.db` or '
                                 '`sqlite:////absolute/path.db`.')
        return f'sqlite:///{os.path.abspath(path[3:])}'
    if '://' in text or '=' in text:
        raise PlanStoreError(f'Cannot open plan store {text!r} for workers: use `sqlite:///runs.db` (a file) or '
                             '`postgresql://user@host/db` (a URL, not libpq keywords).')
    return f'sqlite:///{os.path.abspath(text)}'


def may_repeat(tool: Tool) -> bool:
    """Whether a call of `tool` that may have run may simply run again."""
    metadata = tool.definition.metadata
    return metadata.idempotent is True or metadata.read_only is True


@dataclass(frozen=True, slots=True)
class Unknown:
    """A step whose worker died while its tool ran, and whose tool may not run twice."""

    executor: str
    """The worker it started on."""
    started_at: float
    tool: str

    def reason(self, step_id: str) -> str:
        return (f'Unknown after a crash: step {step_id!r} started on worker {self.executor} at '
                f'{when(self.started_at)} and the worker died before it ended. Its tool {self.tool!r} is not marked '
                'idempotent or read-only, so it was not run again. Approve to run it again, or reject to fail it.')


def encode(result: ToolResult) -> dict[str, Any]:
    """A tool result as JSON data (its value read as JSON data, as a durable run stores it)."""
    data: dict[str, Any] = {'output': result.output, 'error': result.error, 'raised': result.raised}
    if result.error is None and result.has_value:
        try:
            data['value'] = jsonable(result.value)
            json.dumps(data['value'])
        except Exception as exc:  # a foreign value's own code may raise anything
            return encode(ToolResult.failure(
                f'The tool returned a value that cannot be sent back from its worker as JSON '
                f'({type(result.value).__name__}: {exc}). Return JSON-like data: dicts, lists, strings, numbers, '
                'booleans, None, or pydantic models.'))
    return data


def encode_unknown(unknown: Unknown) -> dict[str, Any]:
    return {'unknown': {'executor': unknown.executor, 'started_at': unknown.started_at, 'tool': unknown.tool}}


def decode(data: object) -> ToolResult | Unknown:
    """What `encode` (or `encode_unknown`) made, back."""
    if not isinstance(data, Mapping):
        return ToolResult.failure(f'A worker sent back {type(data).__name__} where a step result was expected.')
    unknown = data.get('unknown')
    if isinstance(unknown, Mapping):
        return Unknown(str(unknown.get('executor')), float(unknown.get('started_at') or 0.0), str(unknown.get('tool')))
    error = data.get('error')
    if error is not None:
        return ToolResult('', str(error), raised=bool(data.get('raised')))
    if 'value' in data:
        return ToolResult(str(data.get('output') or ''), None, data['value'], True)
    return ToolResult(str(data.get('output') or ''))
