"""frontdoor/: serve, run, the seal, and the clients run under it (Python, Node)."""
