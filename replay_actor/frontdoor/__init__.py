"""The front door: every vendor API over local HTTP, for any application in
any language with no code changed (docs/front-door.md).

- ``app``: the ASGI application (token, body bound, routing to the vendor registry);
- ``server``: one acquisition and one uvicorn server, the ready line (``replay-actor serve``);
- ``protocol``: the HTTP/1.1 protocol it serves with (uvicorn's on httptools, h11 where
  httptools is missing), a proxied request's whole target handed to the application;
- ``run``: the front door plus a child command with its environment pointed at it
  (``replay-actor run MANIFEST -- COMMAND``);
- ``environment``: the environment ``run`` gives the command;
- ``seal``: the namespace seal: the front door the only endpoint the command reaches;
- ``proxy``: the front door as the sealed run's proxy: every request refused and counted;
- ``ignore``: the hosts the manifest ignores (``provider.ignore``): incidental traffic,
  refused at once and counted as ``ignored``, which does not fail the run;
- ``switches``: the ecosystem's offline and no-telemetry variables ``run`` sets;
- ``clock``: COMMAND's wall clock started at ``provider.clock`` (libfaketime, probed);
- ``sockets``: the host's path sockets, hidden from a sealed child in a mount namespace;
- ``summary``: ``run``'s last word: the summary line and the exit status;
- ``misses``: each miss said on stderr as it happens, with the ``add`` command that
  answers it, and the missed request saved to the fixture's request sidecar;
- ``tools``: a tool's HTTP exchange through the proxy (another host's request), read
  into an ``http`` request and answered from the provider (docs/tools.md);
- ``tunnel``: ``CONNECT``: the tunnel's TLS terminated, each request inside served as
  its host's;
- ``authority``: the run's ephemeral certificate authority, its owner-only folder and
  the bundle the child trusts.

Needs the ``serve`` extra (uvicorn, cryptography).
"""

from __future__ import annotations

from .app import MAX_BODY_BYTES, FrontDoorApp
from .run import run_command
from .server import FrontDoor, serve_forever

__all__ = ["MAX_BODY_BYTES", "FrontDoor", "FrontDoorApp", "run_command", "serve_forever"]
