"""Vendor wire shapes (OpenAI chat completions, Anthropic messages) and the neutral
request/response of docs/request.md: the one place a vendor's shapes are read or
written. See docs/sdk.md for the mapping table."""
