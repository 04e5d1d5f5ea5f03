"""replay/io/: the plumbing both sides use (the channel, the core follower, a process's
identity)."""
