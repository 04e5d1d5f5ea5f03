"""replay/: one acquisition's cursor actor, as a whole; its rooms by process below."""
