"""mqctl: the command line for queues, against a daemon's URL or straight on a root."""
