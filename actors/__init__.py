"""The actor processes: save, fetch, mover and reaper."""
