"""The replay layer points down only (docs/architecture.md, "Layers"): nothing under
``replay/`` imports a higher package, lazily or not. A miss is explained by the
explainer the caller's layer passes in, and the Ray backend is reached by the manifest
without ``integrations/``."""

from __future__ import annotations

from tests.test_layout import _graph

#: What ``replay/`` may import besides itself: the layers below it.
BELOW = ("replay_actor._errors", "replay_actor._request", "replay_actor._canonical")
BELOW_PACKAGES = ("replay_actor.fixture",)


def test_replay_imports_only_the_layers_below_it() -> None:
    graph = _graph()
    found = []
    for module, imported in graph.items():
        if not module.startswith("replay_actor.replay"):
            continue
        for target in imported:
            if target == "replay_actor" or target.startswith("replay_actor.replay"):
                continue
            if target in BELOW or target.startswith(BELOW_PACKAGES):
                continue
            found.append(f"{module} -> {target}")
    assert not found, found


def test_the_manifest_reaches_both_backends_without_integrations() -> None:
    imported = _graph()["replay_actor.manifest"]
    assert "replay_actor.replay.ray_backend" in imported
    assert not [m for m in imported if m.startswith("replay_actor.integrations")]
