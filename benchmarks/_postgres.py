"""A throwaway PostgreSQL server for the tests and benchmarks: `initdb` in a temporary folder, `pg_ctl start` on a
Unix socket in that folder (no TCP port), stopped and deleted at the end.

By default it runs with `fsync` off (`-F`): the tests' data is thrown away, and what they measure is round trips,
not the disk. `temporary_postgres(durable=True)` runs it with the settings a user runs (the server's defaults:
`fsync=on`, `synchronous_commit=on`, `full_page_writes=on`), for the benchmarks that report what a commit costs.

It needs Debian's `postgresql` package (`apt-get install postgresql`: binaries in `/usr/lib/postgresql/<ver>/bin`)
or any `initdb`/`pg_ctl` on the PATH, and psycopg (`pip install "toolweave[postgres]"`). `initdb` refuses to run
as root: as root, the server runs as the `postgres` system user (`runuser -u postgres --`), in a folder it owns.
When something is missing, `unavailable()` says what.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ('PostgresServer', 'temporary_postgres', 'unavailable')


def _binaries() -> Path | None:
    """The folder with `initdb` and `pg_ctl`: the newest Debian install, else the PATH."""
    versions = sorted(Path('/usr/lib/postgresql').glob('*/bin/initdb'),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    found = shutil.which('initdb')
    return Path(found).resolve().parent if found else None


def unavailable() -> str | None:
    """Why a temporary PostgreSQL cannot be started here, or `None` when it can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return 'psycopg is not installed: pip install "toolweave[postgres]"'
    folder = _binaries()
    if folder is None or not (folder / 'pg_ctl').exists():
        return 'PostgreSQL is not installed: apt-get install postgresql (initdb and pg_ctl are needed)'
    if os.geteuid() == 0:
        if shutil.which('runuser') is None:
            return 'running as root without `runuser`, and initdb refuses to run as root'
        try:
            import pwd

            pwd.getpwnam('postgres')
        except KeyError:
            return 'running as root and there is no `postgres` user to run the server as (initdb refuses root)'
    return None


class PostgresServer:
    """A running temporary server; `url` connects to its `postgres` database over the Unix socket."""

    def __init__(self, folder: Path, bin_dir: Path, as_postgres: bool, *, durable: bool = False) -> None:
        self.folder = folder
        self.data = folder / 'data'
        self._bin = bin_dir
        self._as_postgres = as_postgres
        self.durable = durable
        """`fsync` and `synchronous_commit` on (a commit waits for the disk), else `fsync` off."""

    @property
    def settings(self) -> str:
        """What the server was started with, for reports."""
        if self.durable:
            return 'fsync=on, synchronous_commit=on (the defaults: a commit waits for the disk)'
        return 'fsync=off (a commit does not wait for the disk; a crash of the machine may lose or corrupt data)'

    @property
    def url(self) -> str:
        return f'postgresql:///postgres?host={self.folder}&user=postgres'

    def _run(self, *args: str) -> None:
        command = [str(self._bin / args[0]), *args[1:]]
        if self._as_postgres:
            command = ['runuser', '-u', 'postgres', '--', *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f'{" ".join(command)} failed ({done.returncode}): {done.stderr.strip() or done.stdout}')

    def init(self) -> None:
        self._run('initdb', '-D', str(self.data), '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync')

    def start(self) -> None:
        # No TCP listener: the socket lives in the temporary folder. `-F` (no fsync) is for throwaway data only.
        durability = '-c fsync=on -c synchronous_commit=on -c full_page_writes=on' if self.durable else '-F'
        self._run('pg_ctl', '-D', str(self.data), '-l', str(self.folder / 'server.log'), '-w', '-t', '60',
                  '-o', f"-k {self.folder} -c listen_addresses='' {durability} -c max_connections=200", 'start')

    def stop(self, mode: str = 'fast') -> None:
        self._run('pg_ctl', '-D', str(self.data), '-m', mode, '-w', 'stop')


@contextmanager
def temporary_postgres(*, durable: bool = False) -> Iterator[PostgresServer]:
    """Start a temporary server (`durable`: with fsync on, see the module docstring); stop it and delete its folder
    at the end. Raises `RuntimeError` with the reason when it cannot start (see `unavailable`)."""
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    bin_dir = _binaries()
    assert bin_dir is not None
    as_postgres = os.geteuid() == 0
    folder = Path(tempfile.mkdtemp(prefix='tw-pg-'))
    if as_postgres:
        shutil.chown(folder, 'postgres')
    server = PostgresServer(folder, bin_dir, as_postgres, durable=durable)
    try:
        server.init()
        server.start()
        try:
            yield server
        finally:
            try:
                server.stop('immediate')
            except RuntimeError:
                pass  # already stopped (a test stopped it to see the store fail)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
