"""replay/core/: the I/O-free core (the control messages)."""
