"""Integrations: where replay-actor meets the code people already have.

Each integration imports its framework lazily (the core never needs it) and takes any
provider from ``open_provider``, so replay, live and record all reach it unchanged.
"""
