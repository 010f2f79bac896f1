"""``python -m ithaca``: the same CLI as the ``ithaca`` console script."""

from ithaca.cli.entry import main

main()
