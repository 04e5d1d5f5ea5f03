"""Live adapters: how a live or record provider reaches a vendor's API.

::

    base.py     the public ``Adapter`` protocol and the lookup by name (entry-point group
                ``replay_actor.adapters``, then the built-in ones); third-party adapters
                implement ``Adapter``
    builtin.py  the built-in adapters, one per vendor shape of ``vendors.REGISTRY``
                (``openai``, ``anthropic``, ``gemini``, ``ollama``, ``cohere``, ...), made
                from it
    live.py     ``LiveProvider``: validates, normalises, calls an adapter, counts
    forward.py  ``HttpForwarder``: a tool's HTTP exchange sent on to its own host (the
                live side of the ``http`` kind, whatever the adapter)
    _config.py  the manifest keys every HTTP adapter shares, checked
    _http.py    deadlines, bounded retries, ``Retry-After``, capped reads, secret-free errors
    _aclients.py  the async path's pooled client per event loop: aiohttp's, else httpx2's
    _secrets.py long pieces of the API key: found in text, redacted from HTTP logs

Nothing here is imported by the replay path. The other packages take these from here:
``holds_key_piece`` (whether text shares a long piece with a key: ``run``'s environment)
and ``toml_type_name`` (a manifest value's type in TOML's words: the manifest's errors).
"""

from __future__ import annotations

from ._config import toml_type_name
from ._secrets import holds_key_piece

__all__ = ["holds_key_piece", "toml_type_name"]
