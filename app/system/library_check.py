"""Can a window open here? A check made before Qt starts, because Qt cannot tell us in time.

On Linux, Qt >= 6.5's xcb platform plugin needs system libraries that bare desktops lack (Debian 12 and
Ubuntu 22.04 miss libxcb-cursor0; minimal installs miss libxcb-icccm4, libxcb-keysyms1, ...). Without them, or
without a display, QApplication aborts the process (signal 6) after printing its reason through Qt's message
handler, which an app logging to a file hides. This module finds the missing libraries (`ldd` on the plugin,
plus the ones Qt loads at run time) and says which packages to install. Qt-free and cheap: it runs `ldd`
once. `python -m app.system.library_check` prints the verdict (scripts/start-app.sh runs it) and exits 1 on a problem.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Shared libraries the xcb plugin needs -> (Debian/Ubuntu package, Fedora package, Arch package).
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
}
# Loaded with dlopen at run time, so `ldd` on the plugin does not list it.
RUNTIME_LOADED = ("libxcb-cursor.so.0",)
NO_WINDOW_PLATFORMS = ("offscreen", "minimal", "vnc")


def missing_from_ldd(output: str) -> list[str]:
    """Library names `ldd` reported as "not found", in order, each once."""
    names: list[str] = []
    for line in output.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name not in names:
            names.append(name)
    return names


def install_advice(missing: list[str]) -> str:
    """What to type to install `missing` libraries, on Debian/Ubuntu, Fedora and Arch."""
    known = [PACKAGES[name] for name in missing if name in PACKAGES]
    unknown = [name for name in missing if name not in PACKAGES]
    lines = []
    if known:
        for label, column, command in (
            ("Debian, Ubuntu", 0, "sudo apt install"),
            ("Fedora", 1, "sudo dnf install"),
            ("Arch", 2, "sudo pacman -S"),
        ):
            packages = list(dict.fromkeys(p[column] for p in known))
            lines.append(f"  {command} {' '.join(packages)}    ({label})")
    if unknown:
        lines.append(f"  and the packages that provide: {', '.join(unknown)}")
    return "\n".join(lines)


def _qt_plugin(name: str) -> Path | None:
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms" / name
    return path if path.exists() else None


def missing_xcb_libraries() -> list[str]:
    """Libraries the xcb plugin needs that this system lacks (empty when nothing is known to be missing)."""
    missing: list[str] = []
    plugin = _qt_plugin("libqxcb.so")
    ldd = shutil.which("ldd")
    if plugin is not None and ldd is not None:
        try:
            done = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20, check=False)
            missing += missing_from_ldd(done.stdout)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for name in RUNTIME_LOADED:
        stem = name.removeprefix("lib").split(".so")[0]
        if ctypes.util.find_library(stem) is None and name not in missing:
            missing.append(name)
    return missing


def platform_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why Qt's window platform will fail here, in plain words with what to do; None when it should work."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return None
    requested = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip().lower()
    if requested in NO_WINDOW_PLATFORMS or requested.startswith("wayland"):
        return None
    if not requested and env.get("WAYLAND_DISPLAY"):
        return None  # Qt picks Wayland first on a Wayland session
    if requested not in ("", "xcb"):
        return None  # eglfs, linuxfb...: the user chose; Qt reports its own errors
    missing = missing_xcb_libraries()
    if missing:
        return (
            "SpecExec Desktop cannot open its window: the Qt window system (xcb) needs system libraries "
            f"that are missing: {', '.join(missing)}.\nInstall them, then start the app again:\n"
            + install_advice(missing)
        )
    if not env.get("DISPLAY"):
        return (
            "SpecExec Desktop cannot open its window: there is no display (DISPLAY is not set). Start it "
            "from a desktop session, or over SSH with X forwarding (ssh -X)."
        )
    return None


def main() -> int:
    problem = platform_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print("The window system is ready.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
