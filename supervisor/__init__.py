"""The supervisor: starts every process of the tree, watches them and restarts the dead."""
