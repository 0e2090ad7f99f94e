"""Screenshots of every screen of the desktop app, in the light and the dark theme, into docs/images/
(app-<theme>-<screen>.png), for the README. Offscreen, with the real widgets and the same screens the
contrast test measures (tests/app_screens.py): a few chats in a temporary store, a hardware fixture (a PC
with a 12 GB RTX 3060 and 16 GB of RAM) for the wizard, and the default models folder of a user "you".

    python scripts/app-screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    for name in ("SPECEXEC_DATA_DIR", "SPECEXEC_MODELS_DIR", "SPECEXEC_CONFIG_DIR", "XDG_DATA_HOME"):
        os.environ.pop(name, None)
    os.environ["HOME"] = "/home/you"  # the paths shown are a user's default ones, never this machine's
    # files the app writes for itself (the themed icons) go to a temporary folder, not under that home
    cache = tempfile.TemporaryDirectory(prefix="specexec-screens-cache-")
    os.environ["SPECEXEC_CACHE_DIR"] = cache.name
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from app_screens import HW_FIXTURE, build_screens, settle

    os.environ["SPECEXEC_HW_FIXTURE"] = str(HW_FIXTURE)
    from PySide6.QtWidgets import QApplication

    from app.application import create_application
    from app.settings.schema import Theme
    from app.system.paths import AppPaths
    from app.theme.manager import ThemeManager
    from core.system.locations import models_dir

    app = create_application([sys.argv[0]])
    theme = ThemeManager(app, Theme.LIGHT)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="specexec-screens-") as tmp:
        paths = AppPaths(Path(tmp) / "data", Path(tmp) / "config", Path(tmp) / "logs").ensure()

        def wait(predicate) -> None:
            deadline = time.monotonic() + 60
            while not predicate():
                if time.monotonic() > deadline:
                    raise TimeoutError("a screen did not finish loading")
                QApplication.processEvents()
                time.sleep(0.02)

        screens = build_screens(paths, models_dir(), wait, details=False)
        for name in (Theme.LIGHT, Theme.DARK):
            theme.apply(name)
            settle(20)
            for screen, widget in screens:
                widget.raise_()
                settle(3)
                path = args.out / f"app-{name.value}-{screen}.png"
                widget.grab().save(str(path))
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        for _, widget in screens:
            widget.close()
    cache.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
