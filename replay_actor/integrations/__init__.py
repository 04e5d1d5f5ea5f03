"""Integrations with other frameworks; each module imports its framework lazily, so the
core never pays for (or needs) a framework it does not use."""
