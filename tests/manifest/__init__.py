"""manifest: open_provider from one TOML table."""
