"""A real PostgreSQL 15 server for the tests: initdb in a temporary directory, postgres listening
on a unix socket in that directory only (no TCP port: nothing to pick, nothing another process can
take between picking and binding), one server per test session, a fresh database per test
(``PgServer.database``). The URL names the socket's directory as its host, percent-encoded
(libpq's form: ``postgresql://postgres@%2Ftmp%2Fsizewatch-pg-x/db``), so ``f"{url}/{name}"`` and
``url.rsplit("/", 1)`` work as with a TCP URL.

postgres refuses to run as root: as root the server runs as the ``postgres`` user Debian's
postgresql-15 package creates (or, missing, a ``sizewatch-pg`` system user made here with useradd);
as anyone else, as that user. Nothing is mocked; no docker.
"""
from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

PG_BIN = Path(os.environ.get("SIZEWATCH_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _server_user() -> str | None:
    """Who runs the server: None (this user) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "sizewatch-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "sizewatch-pg"],
                   check=True, capture_output=True)
    return "sizewatch-pg"


class PgServer:
    def __init__(self) -> None:
        for tool in ("initdb", "pg_ctl", "postgres"):
            if not (PG_BIN / tool).exists():
                raise RuntimeError(f"{PG_BIN / tool} missing: scripts/install.sh installs postgresql-15")
        self.user = _server_user()
        self.dir = Path(tempfile.mkdtemp(prefix="sizewatch-pg-"))
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.data = self.dir / "data"
        self.port = 5432                     # only names the socket file, .s.PGSQL.5432, in self.dir
        self._n = itertools.count(1)
        self._run([PG_BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                   "--locale=C", "--no-sync"])
        self.opts = (f"-p {self.port} -k {self.dir} -c listen_addresses='' -c fsync=off "
                     "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self.start()
        self.url = f"postgresql://postgres@{quote(str(self.dir), safe='')}"

    def start(self) -> None:
        """Start the server (again, after ``crash``: on the same port, with crash recovery)."""
        self._run([PG_BIN / "pg_ctl", "-D", self.data, "-o", self.opts, "-l", self.dir / "server.log", "-w",
                   "-t", "60", "start"])

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every backend ends at once, nothing flushed, as a lost machine
        (the next ``start`` recovers from the WAL)."""
        self._run([PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"])

    def _run(self, argv: list) -> None:
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=self.dir,
                              user=self.user, timeout=120)
        if proc.returncode != 0:
            log = self.dir / "server.log"
            raise RuntimeError(f"{argv[0]} failed: {proc.stderr.strip()}\n"
                               f"{log.read_text()[-2000:] if log.exists() else ''}")

    def admin(self, sql: str) -> None:
        import psycopg
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as c:
            c.execute(sql)

    def database(self, template: str | None = None) -> str:
        """A new, empty database (or a copy of ``template``); its URL."""
        name = f"t{os.getpid()}_{next(self._n)}"
        self.admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return f"{self.url}/{name}"

    def password_database(self, user: str, password: str) -> str:
        """A new, empty database owned by ``user``, who must log in with ``password`` (scram-sha-256 for
        that role only: the other tests keep trust); its URL without the password."""
        import time
        if user not in getattr(self, "_roles", set()):
            hba = self.data / "pg_hba.conf"
            hba.write_text(f"local all {user} scram-sha-256\n" + hba.read_text())   # the server's one socket
            self.admin(f"CREATE ROLE \"{user}\" LOGIN PASSWORD '{password}'")
            self.admin("SELECT pg_reload_conf()")
            time.sleep(0.5)                           # the postmaster rereads pg_hba.conf on SIGHUP
            self._roles = getattr(self, "_roles", set()) | {user}
        else:
            self.admin(f"ALTER ROLE \"{user}\" PASSWORD '{password}'")
        name = f"t{os.getpid()}_{next(self._n)}"
        self.admin(f'CREATE DATABASE "{name}" OWNER "{user}"')
        return f"postgresql://{user}@{quote(str(self.dir), safe='')}/{name}"

    def drop(self, url: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')

    def stop(self) -> None:
        try:
            self._run([PG_BIN / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class RawSql:
    """Plain SQL on a store behind sizewatch's back (as an old sizewatch or another tool writes it),
    on either kind: ``?`` placeholders, autocommit, sqlite's dialect (db.dialect rewrites it)."""

    def __init__(self, db) -> None:
        from db.dialect import is_url
        self.pg = is_url(str(db))
        if self.pg:
            from db.pg import Connection
            self.conn = Connection(str(db))
        else:
            import sqlite3
            self.conn = sqlite3.connect(db, isolation_level=None)

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql, params)

    def script(self, sql: str) -> None:
        if self.pg:
            for stmt in filter(str.strip, sql.split(";")):
                self.conn.execute(stmt)
        else:
            self.conn.executescript(sql)

    def one(self, sql: str, params=()):
        return self.conn.execute(sql, params).fetchone()[0]

    def close(self) -> None:
        self.conn.close()
