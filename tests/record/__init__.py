"""record/: record mode."""
