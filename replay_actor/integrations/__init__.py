"""Integrations with the places evaluations run: Inspect AI, pydantic-ai, pytest.

Each module imports its framework when it is imported itself, and nothing in the core
imports these modules: the frameworks stay optional extras (``replay-actor[inspect]``,
``[pydantic-ai]``, ``[pytest]``). Frameworks find them through their own entry points
(``inspect_ai``, ``pytest11``) or an explicit import (``replay_actor.pydantic_ai``).
"""
