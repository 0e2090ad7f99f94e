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
program="$here/specexec-desktop/specexec-desktop"
# Exec= takes the program quoted, as the desktop entry specification says: inside the quotes \ " ` $ are
# escaped with a backslash, then every backslash is doubled (the file's own string escape), and % is %%; so
# a folder named like "R&D", "50%" or "it's \ odd" starts the right program.
quoted=$(printf '%s' "$program" | sed -e 's/[\\"`$]/\\&/g' -e 's/\\/\\\\/g' -e 's/%/%%/g')
mkdir -p "$apps" "$icons"
cp "$here/specexec-desktop.png" "$icons/specexec-desktop.png"
while IFS= read -r line; do
    case $line in
        Exec=*) printf 'Exec="%s"\n' "$quoted" ;;
        *) printf '%s\n' "$line" ;;
    esac
done < "$here/specexec-desktop.desktop" > "$apps/specexec-desktop.desktop"
chmod +x "$apps/specexec-desktop.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$apps" >/dev/null 2>&1 || true
echo "SpecExec Desktop is in your applications menu (it starts $program)."
