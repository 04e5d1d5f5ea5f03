"""adapters/: the live adapters and their HTTP client."""
