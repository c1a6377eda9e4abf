"""The install path a user takes without a clone: build the wheel and the sdist, install each into a fresh venv
(from the package index only, through pip's cache), and use it as the README says.

Slow (about a minute: two venvs, two installs): it runs with `make test-dist` and in CI (`.ci/run`), and skips in
`make test`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not os.environ.get('TOOLWEAVE_TEST_DIST'),
    reason='builds and installs the wheel and the sdist in fresh venvs (about a minute): run `make test-dist` '
           '(CI does)')


def run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, 'PIP_DISABLE_PIP_VERSION_CHECK': '1', 'COLUMNS': '100'})
    assert done.returncode == 0, f'{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}'
    return done.stdout


@pytest.mark.timeout(900)
def test_the_wheel_and_the_sdist_install_and_run_in_a_fresh_venv(tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']
    dist = tmp_path / 'dist'
    run(sys.executable, '-m', 'build', '--outdir', dist, ROOT, cwd=tmp_path)  # the sdist, then the wheel from it
    wheel, sdist = dist / f'toolweave-{version}-py3-none-any.whl', dist / f'toolweave-{version}.tar.gz'
    assert sorted(p.name for p in dist.iterdir()) == [wheel.name, sdist.name]

    # The example plan and its tools, away from the source tree: only the installed package can be imported.
    work = tmp_path / 'work'
    shutil.copytree(ROOT / 'examples', work / 'examples', ignore=shutil.ignore_patterns('__pycache__'))
    for artifact in (wheel, sdist):
        env = tmp_path / f'venv-{artifact.suffix.lstrip(".")}'
        venv.create(env, with_pip=True)
        run(env / 'bin' / 'python', '-m', 'pip', 'install', '--quiet', f'{artifact}[cli]', cwd=work)

        assert run(env / 'bin' / 'toolweave', '--version', cwd=work) == f'toolweave {version}\n'
        where = run(env / 'bin' / 'python', '-c', 'import toolweave; print(toolweave.__file__, toolweave.__version__)',
                    cwd=work)
        assert where.startswith(str(env)) and where.split()[1] == version, where
        out = run(env / 'bin' / 'toolweave', 'run', 'examples/plans/weather.json', '--tools', 'examples.tools:TOOLS',
                  cwd=work)
        assert '4 steps in 2 waves: 4 succeeded, 0 failed' in out, out
        assert 'Tokyo' in out.split('What the model sees')[1]
        license_text = run(env / 'bin' / 'python', '-c', 'from importlib.metadata import distribution as d; '
                           'print(d("toolweave").metadata["License-Expression"])', cwd=work)
        assert license_text.strip() == 'MIT'
