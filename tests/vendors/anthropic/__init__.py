"""vendors/anthropic/: Anthropic's shapes (messages, count_tokens)."""
