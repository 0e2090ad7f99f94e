"""The look: light and dark themes."""
