"""A real redis-server for the queue's tests and bench: started in a temporary directory, listening
on a unix socket there only (``--port 0``: no TCP port, so no free port to pick and lose to another
process before the server binds it), no persistence, stopped (and waited for) at the end."""
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class RedisServer:
    def __init__(self, workdir: Path):
        self.dir = Path(workdir).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "redis.sock"
        if len(str(self.socket)) > 100:          # sun_path holds 108 bytes: a short directory of its own
            self.socket = Path(tempfile.mkdtemp(prefix="sizewatch-redis-")) / "redis.sock"
        self.url = f"unix://{self.socket}?db=0"
        self.log = self.dir / "redis.log"
        self.start()

    def restart(self) -> None:
        """Stopped and started again on the same socket, empty (no persistence): a Redis restart."""
        self.stop()
        self.start()

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server missing: scripts/install.sh installs it")
        self.proc = subprocess.Popen([exe, "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
                                      "--dir", str(self.dir), "--save", "", "--appendonly", "no",
                                      "--daemonize", "no", "--logfile", str(self.log)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log.read_text(errors='replace')[-500:]}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(1)
                    s.connect(str(self.socket))
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
