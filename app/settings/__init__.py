"""Settings: the typed schema on disk, the settings dialogs, system prompt presets."""
