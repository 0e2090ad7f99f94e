"""The local OpenAI-compatible API server hosted by the app, and its row in the settings dialog."""
