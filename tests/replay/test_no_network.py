"""The replay path never creates an internet socket, in the caller or in the actor.

Both processes run with a ``sitecustomize`` that installs an audit hook recording the
family of every socket created (``socket.__new__``) and every address connected to; the
actor inherits it through PYTHONPATH, so nothing in the product is instrumented.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replay_actor import entry_line, request_hash
from tests.support.socket_audit import SITECUSTOMIZE

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]


WORKFLOW = textwrap.dedent(
    """
    import sys
    from replay_actor import acquire, ReplayMiss
    import pickle
    with acquire(sys.argv[1], timeout=10) as p:
        print(p.complete({"messages": [{"role": "user", "content": "hi"}]})["content"])
        try:
            p.complete({"messages": [{"role": "user", "content": "unknown"}]})
        except ReplayMiss:
            print("miss")
        copy = pickle.loads(pickle.dumps(p))
        copy.complete({"messages": [{"role": "user", "content": "hi"}]})
        copy.release()
        p.snapshot()
        print(p.actor_pid)
    """
)


def test_replay_path_creates_only_unix_sockets(tmp_path: Path) -> None:
    fixture = tmp_path / "f.jsonl"
    request = {"messages": [{"role": "user", "content": "hi"}]}
    fixture.write_bytes(entry_line(request_hash(request), response={"content": "ok"}) + b"\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "audit.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["AUDIT_LOG"] = str(log)
    out = subprocess.run(
        [sys.executable, "-c", WORKFLOW, str(fixture)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = out.stdout.split()
    assert lines[:2] == ["ok", "miss"]
    actor_pid = int(lines[2])
    records = [line.split() for line in log.read_text().splitlines()]
    pids = {int(pid) for pid, _, _ in records}
    # Both sides were observed creating sockets (the hook is live in the actor too)...
    assert actor_pid in pids
    assert len(pids) >= 2
    # ...and every one of them was local.
    families = {int(family) for _, _, family in records}
    assert families == {int(socket.AF_UNIX)}, json.dumps(records)
