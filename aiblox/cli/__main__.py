"""``python -m aiblox.cli``: the ``aiblox`` command."""

from aiblox.cli.main import main

main()
