"""The docs and the README: every sample runs, every transcript is what it shows."""
