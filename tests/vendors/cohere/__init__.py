"""vendors/cohere/: Cohere's shapes."""
