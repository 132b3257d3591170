"""A real redis-server for the queue's tests and bench: started on 127.0.0.1 on a free port in a
temporary directory, no persistence, stopped (and waited for) at the end."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = self.dir / "redis.log"
        self.start()

    def restart(self) -> None:
        """Stopped and started again on the same port, empty (no persistence): a Redis restart."""
        self.stop()
        self.start()

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server missing: scripts/install.sh installs it")
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                                      "--save", "", "--appendonly", "no", "--daemonize", "no",
                                      "--logfile", str(self.log)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log.read_text(errors='replace')[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 20 s")

    def client(self):
        from redis import Redis
        return Redis.from_url(self.url)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
