"""What a dashboard server is configured with: the store, the action token, where job logs go."""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path


def sizewatch_command() -> list[str]:
    """How to start the pipeline from the server: the console script beside this Python, else the module."""
    exe = shutil.which("sizewatch", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "cli"]


def read_token(token: str | None, token_file: str | os.PathLike | None) -> str | None:
    """The action token: ``--token`` / ``$SIZEWATCH_TOKEN``, else the first line of ``--token-file``.

    An empty token counts as none (actions stay disabled): a blank variable must not open them.
    """
    if token_file and not token:
        try:
            lines = Path(token_file).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{token_file}: cannot read the token file: {getattr(e, 'strerror', e)}") from None
        token = lines[0] if lines else ""
    token = (token or "").strip()
    return token or None


@dataclass(frozen=True)
class WebSettings:
    db: Path | str                                  # an sqlite file, or a postgresql:// URL
    token: str | None = None                        # None: read-only, every action answers 403
    jobs_dir: Path | None = None                    # re-run logs (default: <db>.jobs beside the store)
    command: list[str] = field(default_factory=sizewatch_command)
    bot_config: Path | None = None                  # the bot's TOML: the policy /bot shows (None: defaults)
    pages_file: Path | None = None                  # rendered-page cache (default: <db>.pages beside the store)
    pages_bytes: int = 256 << 20                    # its bound; 0: no page cache (ETags and 304s still)

    @property
    def is_url(self) -> bool:
        from db.dialect import is_url
        return is_url(self.db)

    def _beside(self, suffix: str) -> Path:
        """``<db><suffix>`` beside an sqlite store, under the cache dir for a PostgreSQL one (db.store.beside)."""
        from db.store import beside
        return beside(self.db, suffix)

    @property
    def job_logs(self) -> Path:
        return self.jobs_dir or self._beside(".jobs")

    @property
    def page_cache(self) -> Path:
        return self.pages_file or self._beside(".pages")

    def db_args(self) -> tuple[list[str], dict[str, str]]:
        """How a command started for this server names its store: ``--db PATH``, or for a PostgreSQL
        store ``$SIZEWATCH_DB`` (a password in an argv would show in ps and on the job page)."""
        if self.is_url:
            return [], {"SIZEWATCH_DB": str(self.db)}
        return ["--db", str(self.db)], {}
