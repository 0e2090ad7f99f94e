"""Build scripts for the double-click installers (PyInstaller bundle, Linux archive and AppImage, Windows
installer, macOS disk image). Not part of the installed app."""
