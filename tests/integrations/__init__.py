"""integrations/: the SDK clients, Inspect, pydantic-ai, the pytest plugin, frameworks."""
