"""``python -m azr``: the same command line as the ``azr`` console script."""

from azr.services.cli import main

main()
