#!/bin/sh
# Add SpecExec Desktop to your applications menu (run once from the unpacked folder; no root needed).
# Remove it again with: sh install-desktop-entry.sh --remove
set -eu
here=$(cd "$(dirname "$0")" && pwd)
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/256x256/apps"
if [ "${1:-}" = "--remove" ]; then
    rm -f "$apps/specexec-desktop.desktop" "$icons/specexec-desktop.png"
    echo "Removed the menu entry. Your chats, models and settings are kept."
    exit 0
fi
mkdir -p "$apps" "$icons"
cp "$here/specexec-desktop.png" "$icons/specexec-desktop.png"
sed "s|^Exec=.*|Exec=\"$here/specexec-desktop/specexec-desktop\"|" "$here/specexec-desktop.desktop" \
    > "$apps/specexec-desktop.desktop"
chmod +x "$apps/specexec-desktop.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$apps" >/dev/null 2>&1 || true
echo "SpecExec Desktop is in your applications menu (it starts $here/specexec-desktop/specexec-desktop)."
