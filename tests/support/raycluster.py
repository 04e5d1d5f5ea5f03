"""A local Ray cluster of a test module's own, started and stopped by it.

Ray's own ``cluster_utils`` starts the nodes in a temporary directory of ours; the
driver (this process) connects to it. ``cluster_utils`` also writes the cluster's
address to ``$RAY_TMPDIR/ray`` (``/tmp/ray`` by default, which need not exist) and removes
it on shutdown, so both run with ``RAY_TMPDIR`` pointing into that directory: nothing
another cluster on the machine reads is touched. Ray keeps worker processes between tasks by
design, so the per-test ``no_leaks`` check does not fit: instead, stopping the cluster
asserts that none of its processes (GCS, raylet, workers, agents) outlived it, and
kills (by PID, as ours) any that did.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil


@dataclass
class Cluster:
    temp_dir: str
    gcs_address: str
    session_dir: str


def cluster_processes(temp_dir: str) -> list[psutil.Process]:
    """Live processes of the cluster rooted at ``temp_dir`` (its path is in their
    command lines: GCS, raylet, workers, agents)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if temp_dir in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@contextlib.contextmanager
def ray_tmpdir(path: str) -> Iterator[None]:
    """``RAY_TMPDIR`` set to ``path`` (with its ``ray`` folder) for the block."""
    os.makedirs(os.path.join(path, "ray"), exist_ok=True)
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = path
    try:
        yield
    finally:
        if before is None:
            del os.environ["RAY_TMPDIR"]
        else:
            os.environ["RAY_TMPDIR"] = before


def new_children(me: psutil.Process, before: set[int]) -> list[psutil.Process]:
    """Our descendants started since ``before`` that still run (workers included: they
    are the raylet's children, and the raylet is ours)."""
    found = []
    for child in me.children(recursive=True):
        try:
            if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@contextlib.contextmanager
def local_cluster(
    *, head_cpus: int, second_node: dict[str, Any] | None = None
) -> Iterator[Cluster]:
    """A head node (and optionally a second node with these ``add_node`` arguments),
    with this process connected as the driver; everything stopped and checked after."""
    ray: Any = importlib.import_module("ray")
    from ray.cluster_utils import Cluster as RayCluster

    # A short path: Ray's unix sockets live under it, and their paths are length-limited.
    temp_dir = tempfile.mkdtemp(prefix="ra-ray-", dir="/tmp")
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    nodes: Any = None
    try:
        with ray_tmpdir(temp_dir):
            nodes = RayCluster(
                initialize_head=True,
                shutdown_at_exit=False,
                head_node_args={
                    "num_cpus": head_cpus,
                    "include_dashboard": False,
                    "temp_dir": temp_dir,
                },
            )
            if second_node is not None:
                nodes.add_node(**second_node)
        context = ray.init(address=nodes.address, log_to_driver=False, logging_level="ERROR")
        names = [p.name() for p in cluster_processes(temp_dir)]
        # The leak check below must be able to see the cluster it checks.
        raylets = 1 + (second_node is not None)
        assert names.count("raylet") == raylets and "gcs_server" in names, names
        yield Cluster(temp_dir, nodes.address, context.address_info["session_dir"])
    finally:
        ray.shutdown()
        if nodes is not None:
            with contextlib.suppress(Exception), ray_tmpdir(temp_dir):
                nodes.shutdown()  # (a node the test killed is gone already)
        deadline = time.monotonic() + 20.0
        left: list[psutil.Process] = []
        while time.monotonic() < deadline:
            left = cluster_processes(temp_dir) + new_children(me, before)
            if not left:
                break
            time.sleep(0.1)
        for proc in left:  # ours (started for this module), stopped by PID, then fail
            with contextlib.suppress(psutil.Error):
                proc.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"Ray processes outlived the cluster: {[p.pid for p in left]}"
