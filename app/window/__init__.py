"""The main window's frame: the window itself, its status bar and the banner above the chat."""
