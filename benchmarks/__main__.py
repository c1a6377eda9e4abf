"""Run every benchmark: `python -m benchmarks [--quick]`.

Each `benchmarks/bench_*.py` module's `main()` runs in turn (alphabetical order); the arguments given here
(`--quick` for a short smoke run) are passed through. Each prints a table and writes its JSON report to
`benchmarks/results/`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ('discover', 'main')


def discover() -> list[str]:
    """The benchmark modules, as importable names, in alphabetical order."""
    return [f'benchmarks.{path.stem}' for path in sorted(Path(__file__).parent.glob('bench_*.py'))]


def main(argv: Sequence[str] | None = None) -> int:
    """Run each benchmark's `main` with `argv`; returns the number of benchmarks that raised."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ('-h', '--help') for arg in args):
        print(__doc__)
        print('benchmarks:', ', '.join(discover()))
        return 0
    failures = 0
    for name in discover():
        print(f'\n=== {name} {" ".join(args)}'.rstrip(), flush=True)
        started = time.perf_counter()
        try:
            entry = importlib.import_module(name).main
            if inspect.signature(entry).parameters:
                entry(args)
            else:  # a main() that reads sys.argv itself
                saved, sys.argv = sys.argv, [name, *args]
                try:
                    entry()
                finally:
                    sys.argv = saved
        except SystemExit as exc:
            if exc.code not in (0, None):
                failures += 1
                print(f'{name} exited with {exc.code!r}', file=sys.stderr)
        except Exception as exc:  # one broken benchmark must not hide the others' numbers
            failures += 1
            print(f'{name} failed: {type(exc).__name__}: {exc}', file=sys.stderr)
        print(f'=== {name}: {time.perf_counter() - started:.1f} s', flush=True)
    return failures


if __name__ == '__main__':
    sys.exit(1 if main() else 0)
