"""Live adapters: how a live or record provider reaches a vendor's API.

::

    base.py     the public ``Adapter`` protocol and the registry (entry-point group
                ``replay_actor.adapters``); third-party adapters implement ``Adapter``
    live.py     ``LiveProvider``: validates, normalises, calls an adapter, counts
    _config.py  the manifest keys every HTTP adapter shares, checked
    _http.py    deadlines, bounded retries, ``Retry-After``, capped reads, secret-free errors
    _secrets.py long pieces of the API key: found in text, redacted from HTTP logs
    openai.py   the built-in ``openai`` adapter (chat completions, any ``base_url``)

Nothing here is imported by the replay path.
"""
