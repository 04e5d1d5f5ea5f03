"""A vendor family declared once: :class:`Family`, the record each family's folder
holds in its ``__init__.py`` (docs/sdk.md, "Adding a vendor").

Runs in: any process that asks which vendors there are. A record is plain data (names,
patterns as text, variable names), so reading every family's record imports none of
their mapping code: a shape's module is imported when the shape is first made. What
used to be written once per consumer is read from the records instead:

=============================  ==========================================  ================
derived                        from the records'                           in
=============================  ==========================================  ================
the registry of shapes         ``shapes``                                  ``vendors/``
the served-with groups         ``name``, ``shapes``                        ``vendors/``
the vendor a path looks like   ``paths``, ``headers``, ``loose_paths``     ``serving/``
(a 401/404 envelope)
the ready line's base URLs     ``ready``                                   ``frontdoor/``
``run``'s variables            ``variables``                               ``frontdoor/``
the lazy SDK client names      ``clients``                                 the package
=============================  ==========================================  ================
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Family", "Variables"]


class Variables(NamedTuple):
    """The environment ``replay-actor run`` gives COMMAND for one family's clients
    (docs/front-door.md, "Clients")."""

    #: Base-URL variables -> the path below the front door's URL each is set to.
    base_urls: tuple[tuple[str, str], ...] = ()
    #: Key variables, always set to the run's token.
    keys: tuple[str, ...] = ()
    #: Key variables set to the token whose clients read no base URL from the
    #: environment: named in ``run``'s warning when inherited.
    unredirected: tuple[str, ...] = ()
    #: Credentials the clients would send instead of, or beside, the token: removed,
    #: and treated as secrets.
    credentials: tuple[str, ...] = ()
    #: Switches that send a client somewhere no base URL above covers: removed.
    switches: tuple[str, ...] = ()
    #: Variables set when the environment has none (``(name, value)``).
    defaults: tuple[tuple[str, str], ...] = ()


class Family(NamedTuple):
    """One vendor family: the APIs its SDKs speak, and everything the rest of the package
    needs to know about it."""

    #: The family's name, also its served-with group's: a transport for
    #: ``api=NAME`` answers every shape below.
    name: str
    #: ``(registry name, "module")`` or ``(registry name, "module:function")`` of each
    #: shape, the family's own first: the module (of the family's folder) defines the
    #: shape's functions and routes (``_shape.ShapeModule``), or the function makes a
    #: shape that remembers what it served. The registry names are what users and
    #: manifests see (``api=``, ``--from``, ``adapter =``).
    shapes: tuple[tuple[str, str], ...]
    #: The hosts of the vendor's real API (``api.openai.com``).
    hosts: tuple[str, ...] = ()
    #: A path this family's alone (a regular expression, searched): its envelope
    #: answers a request to it that nobody serves.
    paths: str = ""
    #: Request headers only its SDKs send (lower case), asked after every family's
    #: ``paths``.
    headers: tuple[str, ...] = ()
    #: A looser path, asked after every family's ``headers`` (Ollama's ``/api/``).
    loose_paths: str = ""
    #: The ready line's key for its SDKs' base URL and the path below the front door's
    #: URL it names (``("openai_base_url", "/v1")``); empty: none.
    ready: tuple[str, str] | tuple[()] = ()
    #: What ``replay-actor run`` sets and removes for its clients.
    variables: Variables = Variables()
    #: The names of its SDK clients built from a manifest (``openai_client``), public
    #: in ``replay_actor`` (``integrations/sdk.py`` builds them).
    clients: tuple[str, ...] = ()
