"""cli/: the replay-actor command."""
