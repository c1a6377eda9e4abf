"""Each benchmark's quick mode runs and writes its JSON report (numbers are measured by the benchmarks, not here)."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path

import anyio
import pytest
from benchmarks import __main__ as runner
from benchmarks import _dags, _floor, _peers, bench_overhead, bench_scheduling

from toolweave.tools import ToolArguments, ToolCallContext, ToolResult


def test_scheduling_quick_writes_its_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / 'scheduling.json'
    report = bench_scheduling.main(['--quick', '--no-peers', '--output', str(output)])
    data = json.loads(output.read_text())
    assert data == json.loads(json.dumps(report))
    assert data['mode'] == 'quick'
    assert data['executors'] == ['toolweave', 'floor', 'waves']
    assert [d['size'] for d in data['dags']] == [20, 20, 50, 50]
    for dag in data['dags']:
        for executor in data['executors']:
            # No schedule beats the critical path of what the tools slept.
            assert dag['makespan'][executor] >= dag['slept_critical_path'][executor]
    assert set(data['classes']) == {'20', '50', 'all'}
    out = capsys.readouterr().out
    assert 'makespan / critical path of the durations slept' in out


# Extra arguments that keep a quick run within the smoke budget (tracemalloc alone takes ~15 s on a busy machine).
SMOKE_EXTRA = {'benchmarks.bench_overhead': ['--no-memory', '--no-peers']}


@pytest.mark.parametrize('name', [n for n in runner.discover() if n != 'benchmarks.bench_scheduling'])
def test_every_benchmark_quick_mode_writes_its_report(name: str, tmp_path: Path) -> None:
    # The convention every bench_*.py follows: `main(argv)` with `--quick` and `--output PATH`.
    output = tmp_path / 'report.json'
    importlib.import_module(name).main(['--quick', '--output', str(output), *SMOKE_EXTRA.get(name, [])])
    assert isinstance(json.loads(output.read_text()), dict)


def test_overhead_on_trio_runs_toolweave_there_and_the_floor_on_asyncio(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[str] = set()

    class Noting(bench_overhead.NoopTool):
        async def execute(self, arguments: ToolArguments, context: ToolCallContext) -> ToolResult:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                seen.add('trio')  # no asyncio loop runs this call
            else:
                seen.add('asyncio')
            return self._result

    monkeypatch.setitem(bench_overhead.TOOLS, 'noop', Noting)
    output = tmp_path / 'overhead.json'
    bench_overhead.main(['--quick', '--no-memory', '--no-peers', '--loop', 'trio', '--output', str(output)])
    assert seen == {'trio', 'asyncio'}  # the floor is bare asyncio: the trio calls are toolweave's
    data = json.loads(output.read_text())
    assert data['loop'] == 'trio'
    assert all(case['us_per_step']['toolweave'] > 0 and case['us_per_step']['floor'] > 0 for case in data['cases'])
    small = data['small_plans_us_per_plan']  # plans of 1, 5 and 20 steps, one after another: both runners ran them
    assert list(small) == ['1', '5', '20']
    assert all(us['toolweave'] > 0 and us['floor'] > 0 for us in small.values())
    seen.clear()
    bench_overhead.main(['--quick', '--no-memory', '--no-peers', '--output', str(output)])
    assert seen == {'asyncio'}  # the next run in the same process is on asyncio again


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason="the peak is Linux's VmHWM")
def test_overhead_measures_each_runners_process_peak_in_a_fresh_process() -> None:
    ballast = b'x' * (300 * 2**20)  # this process's peak (every page written) must not become the children's
    case = bench_overhead.Case('noop', 'chain', 10, plans=5)
    bench_overhead._process_peak(case)
    del ballast
    # A fresh Python with toolweave imported holds a few MiB at least; the two runners are measured apart.
    assert set(case.peak_mib) == {'toolweave', 'floor'}
    assert all(5 < mib < 250 for mib in case.peak_mib.values()), case.peak_mib


def test_every_benchmark_module_is_discovered() -> None:
    names = runner.discover()
    assert 'benchmarks.bench_scheduling' in names
    assert names == sorted(names)


def test_the_floor_runs_a_plan_eagerly_and_resolves_references() -> None:
    plan = _dags.diamond()
    latencies = {'step_0': 0.01, 'step_1': 0.05, 'step_2': 0.01, 'step_3': 0.01}
    tool = _dags.FakeTool(latencies)
    outputs = anyio.run(_floor.run_floor, plan, {tool.name: tool})
    assert outputs == {f'step_{i}': f'step_{i}' for i in range(4)}
    assert set(tool.slept) == set(latencies)


@pytest.mark.skipif(not _peers.langgraph_available(), reason='LangGraph is an optional benchmark peer (.[bench])')
def test_the_langgraph_peer_runs_a_plan() -> None:
    tool = _dags.FakeTool({})
    outputs = anyio.run(_peers.langgraph_runner(_dags.random_dag(30, seed=1, width=5), tool))
    assert outputs == {f'step_{i}': f'step_{i}' for i in range(30)}


def test_the_reference_executor_runs_wave_by_wave() -> None:
    plan = _dags.diamond()
    latencies = {'step_0': 0.01, 'step_1': 0.05, 'step_2': 0.01, 'step_3': 0.01}
    tool = _dags.FakeTool(latencies)
    times = anyio.run(bench_scheduling.run_waves, plan, {tool.name: tool})
    assert times['step_1'][0] >= times['step_0'][1] and times['step_2'][0] >= times['step_0'][1]
    assert times['step_3'][0] >= max(times['step_1'][1], times['step_2'][1])


@pytest.mark.parametrize('seed', range(5))
def test_random_dag_shape(seed: int) -> None:
    plan = _dags.random_dag(60, seed=seed, width=6, max_deps=3, shuffle=True)
    ids = _dags.step_ids(plan)
    assert sorted(ids) == sorted(f'step_{i}' for i in range(60))
    deps = _dags.dependencies(plan)
    assert all(1 <= len(d) <= 3 for step, d in deps.items() if step not in _dags.waves(plan)[0])
    assert all(int(d.split('_')[1]) < int(step.split('_')[1]) for step, ds in deps.items() for d in ds)
    assert _dags.random_dag(60, seed=seed, width=6, shuffle=True) == plan  # seeded: same input, same DAG
    waves = _dags.waves(plan)
    assert sum(len(w) for w in waves) == 60
    level = {s: i for i, w in enumerate(waves) for s in w}
    assert all(level[s] == 1 + max((level[d] for d in ds), default=-1) for s, ds in deps.items())


def test_critical_path_and_generators() -> None:
    assert _dags.waves(_dags.chain(4)) == [['step_0'], ['step_1'], ['step_2'], ['step_3']]
    assert [len(w) for w in _dags.waves(_dags.fan_out(5))] == [5, 1]
    assert [len(w) for w in _dags.waves(_dags.fan_out(5, aggregate=False))] == [5]
    latencies = {'step_0': 1.0, 'step_1': 5.0, 'step_2': 2.0, 'step_3': 0.5}
    assert _dags.critical_path(_dags.diamond(), latencies) == 6.5
    assert _dags.critical_path(_dags.chain(4), latencies) == 8.5
    sampled = _dags.sample_latencies(_dags.chain(200), seed=3)
    assert sampled == _dags.sample_latencies(_dags.chain(200), seed=3)
    assert all(0.001 <= v <= 0.060 for v in sampled.values())
    assert max(sampled.values()) > 4 * sorted(sampled.values())[100]  # heavy tail: the slowest >> the median
    with pytest.raises(ValueError, match='n_steps must be >= 1'):
        _dags.random_dag(0, seed=1)
