"""Every ```python fence in the README and docs runs, and prints what its `#>` lines say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]
FENCE = re.compile(r'^```python\n(.*?)^```', re.MULTILINE | re.DOTALL)


def expected_output(code: str) -> list[str]:
    return [line.strip()[2:].strip() for line in code.splitlines() if line.strip().startswith('#>')]


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: p.name)
def test_fences_run_and_print_what_they_say(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {'__name__': f'doc_{doc.stem}'}
    fences = FENCE.findall(doc.read_text())
    for index, code in enumerate(fences):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f'{doc.name}[fence {index}]', 'exec'), namespace)
        printed = [line.strip() for line in out.getvalue().splitlines()]
        assert printed == expected_output(code), f'{doc.name} fence {index}'
