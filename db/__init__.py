"""The result store: builds, symbols, inline facts and findings per commit × toolchain (sqlite)."""
from db.store import Store, open_store, default_path  # noqa: F401
