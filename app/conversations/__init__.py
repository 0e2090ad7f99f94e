"""The conversations: their SQLite store, the list models views bind to, the sidebar, export."""
