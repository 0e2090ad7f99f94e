"""The frozen app's entry script: `specexec-desktop` (the whole bundle runs through this file).

The engine process is started by multiprocessing's "spawn" method, which in a frozen app re-launches this
same executable with `--multiprocessing-fork ...`: `freeze_support()` must run first, before Qt or anything
heavy is imported, so that such a child turns into the engine at once instead of opening a window.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.main import main

    sys.exit(main())
