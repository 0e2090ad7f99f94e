"""The app's side of the engine: the bridge between Qt and the engine process."""
