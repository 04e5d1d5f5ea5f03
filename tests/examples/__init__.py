"""examples/: each example runs as its docs say, from fixtures it derives."""
