"""``python -m crs_backends.neural.sources fetch|status|build-small``: the checkpoints' command line, which lives in
:mod:`crs_backends.neural.fetch` (above the resolving in :mod:`crs_backends.neural.sources`, which imports nothing of
it). A module of its own, as ``python -m`` runs a package's ``__main__``, so that no module imports back up.
"""

from crs_backends.neural.fetch import main

raise SystemExit(main())
