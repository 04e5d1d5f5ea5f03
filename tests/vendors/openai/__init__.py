"""vendors/openai/: OpenAI's shapes (chat, Responses, embeddings, completions, input tokens)."""
