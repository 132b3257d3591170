"""``python -m cli``: the ``sizewatch`` command."""
from cli.main import main

main()
