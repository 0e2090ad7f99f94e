"""SpecExec engine library: sampling, draft tree search, verification, caches, model loading.

Nothing in this package imports Qt; the desktop front end lives in `app/`.
"""

__version__ = "0.1.0"
