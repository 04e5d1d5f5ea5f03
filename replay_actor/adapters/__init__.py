"""Live adapters: how a live or record provider reaches a vendor's API.

::

    base.py     the public ``Adapter`` protocol and the registry (entry-point group
                ``replay_actor.adapters``); third-party adapters implement ``Adapter``
    live.py     ``LiveProvider``: validates, normalises, calls an adapter, counts
    _config.py  the manifest keys every HTTP adapter shares, checked
    _http.py    timeouts, bounded retries, ``Retry-After``, secret-free errors
    openai.py   the built-in ``openai`` adapter (chat completions, any ``base_url``)

Nothing here is imported by the replay path.
"""
