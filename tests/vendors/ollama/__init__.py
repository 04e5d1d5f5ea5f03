"""vendors/ollama/: Ollama's native API (chat, generate, embed)."""
