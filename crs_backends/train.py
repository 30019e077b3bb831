"""``python -m crs_backends.train``: the training command line under its first name, an alias of
``crs-arena train``; the command lives in :mod:`crs_backends.neural.train_command` (the training loops in
:mod:`crs_backends.neural.training`)."""

from __future__ import annotations

from crs_backends.neural.train_command import main

if __name__ == "__main__":
    main()
