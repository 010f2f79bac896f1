"""``python -m ithaca``: the same CLI as the ``ithaca`` console script."""

from ithaca.cli.main import main

main()
