"""Every ```python fence in the README and the docs runs as a reader would copy it, and prints what its `#>` lines say.

A fence runs on its own, in a fresh namespace, unless its first line says which block it continues:
`# Continues the block above.` or `# Continues the first block on this page.`. Then it runs in the namespace that
block (and whatever that block continues) left, as the reader is told to paste it. The printed output must match
the `#>` lines exactly: same lines, same columns (only trailing spaces, which no reader sees, are ignored).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
FENCE = re.compile(r'^```python\n(.*?)^```', re.MULTILINE | re.DOTALL)
ABOVE = '# Continues the block above.'
FIRST = '# Continues the first block on this page.'


@dataclass(frozen=True)
class Fence:
    doc: Path
    index: int
    code: str

    @property
    def continues(self) -> int | None:
        """The index of the block this one continues, if it says so."""
        if self.code.startswith(ABOVE):
            return self.index - 1
        if self.code.startswith(FIRST):
            return 0
        return None

    @property
    def name(self) -> str:
        return f'{self.doc.relative_to(ROOT)}[fence {self.index}]'


def fences(doc: Path) -> list[Fence]:
    return [Fence(doc, index, code) for index, code in enumerate(FENCE.findall(doc.read_text()))]


def expected_output(code: str) -> list[str]:
    """The `#>` lines, as printed: the text after `#> ` (one space), leading spaces kept."""
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip()
        if stripped.startswith('#>'):
            text = stripped[2:]
            lines.append((text[1:] if text.startswith(' ') else text).rstrip())
    return lines


def run_fence(fence: Fence, namespace: dict[str, object]) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(fence.code, fence.name, 'exec'), namespace)
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert printed == expected_output(fence.code), fence.name


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fences_run_alone_or_after_the_block_they_continue(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespaces: dict[int, dict[str, object]] = {}  # by fence: the namespace it ran in (shared along a chain)
    for fence in fences(doc):
        continued = fence.continues
        fresh: dict[str, object] = {'__name__': f'doc_{doc.stem}_{fence.index}'}
        namespace = namespaces[continued] if continued is not None else fresh
        namespaces[fence.index] = namespace
        run_fence(fence, namespace)


def test_a_fence_that_continues_has_a_block_before_it() -> None:
    orphans = [f.name for doc in DOCS for f in fences(doc) if f.continues is not None and f.continues < 0 or
               f.continues == 0 and f.index == 0]
    assert orphans == []


def test_expected_output_keeps_columns() -> None:
    code = "print('x')\n#> x\n#>     ^ here\n#>\n    #> indented"
    assert expected_output(code) == ['x', '    ^ here', '', 'indented']
