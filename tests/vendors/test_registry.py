"""One registry names every vendor shape, for replay, live and record at once.

The live adapters are made from ``vendors.REGISTRY`` (``adapters/builtin.py``), so the two
cannot drift: every shape has its built-in adapter under its name, found with the entry
points absent or stale, and a shape added with one registry line (here a made-up
``acme``) is served by the transports, asked live and recorded with no adapter code.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest

from replay_actor import ManifestError, ProviderTransport, open_provider
from replay_actor.adapters import builtin
from replay_actor.adapters.base import (
    ADAPTER_GROUP,
    builtin_names,
    load_adapter_factory,
)
from replay_actor.adapters.builtin import VendorAdapter, builtin_adapter
from replay_actor.vendors import REGISTRY, Vendor, make_vendor, vendor_names
from replay_actor.vendors._endpoint import EndpointOption, LiveEndpoint
from replay_actor.vendors._shape import ShapeModule
from replay_actor.vendors.anthropic import messages as anthropic_messages
from replay_actor.vendors.gemini import generate as gemini_generate
from replay_actor.vendors.openai import chat as openai_chat
from replay_actor.vendors.openai.responses import remembering
from tests.support.chat_server import ChatServer
from tests.support.paths import ROOT

KEY_VAR = "REPLAY_ACTOR_TEST_ACME_KEY"
SECRET_KEY = "acme-test-SECRET-7d1e"

# mypy --strict checks that every shipped shape keeps the contract: its module
# (a ShapeModule), or what its factory makes (a Vendor).
_TYPED: Final[tuple[ShapeModule, ...]] = (openai_chat, anthropic_messages, gemini_generate)
_MADE: Final[Vendor] = remembering()


def _expected_url(endpoint: LiveEndpoint, model: str) -> str:
    defaults = {o.key: o.default for o in endpoint.options if o.header is None}
    return endpoint.base_url + endpoint.path.format(model=model, **defaults)


# -- the registry and the adapters cannot drift --------------------------------------------


def test_every_vendor_shape_has_its_builtin_adapter_and_every_adapter_a_shape() -> None:
    assert builtin_names() == vendor_names() == tuple(REGISTRY)
    assert {"openai", "anthropic", "openai-responses", "gemini"} <= set(vendor_names())
    classes = set()
    for name in vendor_names():
        vendor = make_vendor(name)
        assert isinstance(vendor.live, LiveEndpoint), name
        adapter = builtin_adapter(name)
        assert issubclass(adapter, VendorAdapter)
        assert adapter is builtin_adapter(name)  # one class per name
        assert (adapter.name, adapter.vendor.name) == (name, name)
        assert adapter.__name__ == vendor.live.adapter
        # The name the entry points use resolves to the same class.
        assert getattr(importlib.import_module(adapter.__module__), adapter.__name__) is adapter
        classes.add(adapter.__name__)
    assert len(classes) == len(vendor_names())
    with pytest.raises(ValueError, match="api must be one of"):
        builtin_adapter("no-such-shape")
    with pytest.raises(AttributeError):
        importlib.import_module("replay_actor.adapters.builtin").NoSuchAdapter  # noqa: B018


def test_the_package_entry_points_name_the_builtin_adapters() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared: dict[str, str] = pyproject["project"]["entry-points"][ADAPTER_GROUP]
    assert declared, "the built-in adapters are advertised in the entry-point group"
    for name, value in declared.items():
        assert name in vendor_names(), f"entry point {name!r} names no vendor shape"
        module, _, attribute = value.partition(":")
        assert getattr(importlib.import_module(module), attribute) is builtin_adapter(name)


@pytest.mark.parametrize("name", vendor_names())
@pytest.mark.parametrize("metadata", ["installed", "absent", "stale"])
def test_every_builtin_name_loads_whatever_the_metadata(
    name: str, metadata: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if metadata == "absent":
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    elif metadata == "stale":
        # An editable install whose entry points were never regenerated: they name
        # modules that are no longer there.
        stale = [
            importlib.metadata.EntryPoint(
                name=n, value=f"replay_actor.adapters.gone_{i}:Adapter", group=ADAPTER_GROUP
            )
            for i, n in enumerate(vendor_names())
        ]
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: stale)
    factory = load_adapter_factory(name)
    assert factory is builtin_adapter(name)
    adapter: Any = factory({"model": "m"})
    try:
        assert adapter._config.url == _expected_url(make_vendor(name).live, "m")
    finally:
        adapter.close()


def test_an_unknown_adapter_lists_every_builtin_even_without_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    with pytest.raises(ManifestError, match="unknown adapter") as caught:
        load_adapter_factory("nope")
    for name in vendor_names():
        assert repr(name) not in str(caught.value)  # names, not reprs, are listed
        assert re.search(rf"[ (]{re.escape(name)}[,)]", str(caught.value)), name


# -- one registry line: replay, live and record ----------------------------------------------


#: A made-up vendor shape: OpenAI's chat wire under another name, route and key
#: header, with a key of its own sent as a header.
ACME: Final = dataclasses.replace(
    make_vendor("openai"),
    name="acme",
    routes=(re.compile(r"/acme/chat/?$"),),
    paths=("POST /acme/chat",),
    live=LiveEndpoint(
        adapter="AcmeAdapter",
        shape="an acme answer",
        base_url="https://acme.invalid/v1",
        path="/chat/completions",
        key_header="x-acme-key",
        options=(EndpointOption("acme_tier", "free", header="x-acme-tier"),),
    ),
)


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setitem(REGISTRY, "acme", f"{__name__}:ACME")
    monkeypatch.setenv(KEY_VAR, SECRET_KEY)
    yield "acme"
    # Only the made-up shape's adapter class goes: the others stay the classes tests
    # imported.
    builtin._MADE.pop("acme", None)


def test_a_shape_added_with_one_registry_line_is_live_recorded_and_replayed(
    acme: str, chat: ChatServer, tmp_path: Path, no_leaks: None
) -> None:
    assert load_adapter_factory(acme).__name__ == "AcmeAdapter"
    table = {
        "adapter": acme,
        "model": "acme-1",
        "base_url": chat.base_url("echo"),
        "api_key_env": KEY_VAR,
        "acme_tier": "gold",
        "retry_backoff": 0.0,
    }
    body = {"model": "acme-1", "messages": [{"role": "user", "content": "hello"}]}
    fixture = tmp_path / "acme.jsonl"
    record = {"provider": {"kind": "record", "fixture": str(fixture), "live": table}}
    with httpx2.Client(transport=ProviderTransport(open_provider(record), api=acme)) as http:
        recorded = http.post("http://acme.invalid/acme/chat", json=body)
    assert recorded.status_code == 200
    assert recorded.json()["choices"][0]["message"]["content"] == "1: hello"
    sent = chat.received[-1]
    assert sent.headers["x-acme-key"] == SECRET_KEY
    assert sent.headers["x-acme-tier"] == "gold"
    assert "authorization" not in sent.headers
    assert len(fixture.read_text(encoding="utf-8").splitlines()) == 1
    calls = len(chat.received)
    replay = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    with httpx2.Client(transport=ProviderTransport(open_provider(replay), api=acme)) as http:
        replayed = http.post("http://acme.invalid/acme/chat", json=body)
        missing = http.post("http://acme.invalid/v1/chat/completions", json=body)
    assert replayed.json()["choices"] == recorded.json()["choices"]
    assert len(chat.received) == calls  # replay never reached the server
    assert missing.status_code == 404 and "/acme/chat" in json.dumps(missing.json())


def test_an_added_shape_checks_its_own_keys(acme: str) -> None:
    with pytest.raises(ManifestError) as unknown:
        open_provider({"provider": {"kind": "live", "adapter": acme, "model": "m", "tier": "x"}})
    assert unknown.value.key == "provider.tier"
    assert "for the acme adapter" in str(unknown.value)
    with pytest.raises(ManifestError) as typed:
        open_provider({"provider": {"kind": "live", "adapter": acme, "model": "m", "acme_tier": 3}})
    assert typed.value.key == "provider.acme_tier"


def test_a_shape_routed_elsewhere_never_lists_the_paths_it_inherited() -> None:
    from replay_actor.serving._routes import described

    # A shape made from another with routes of its own cannot keep the paths it no
    # longer routes: it is refused, and without paths it is listed by name.
    with pytest.raises(ValueError, match="lists 'POST /v1/chat/completions'"):
        dataclasses.replace(
            make_vendor("openai"), name="elsewhere", routes=(re.compile(r"/elsewhere/?$"),)
        )
    elsewhere = dataclasses.replace(
        make_vendor("openai"), name="elsewhere", routes=(re.compile(r"/elsewhere/?$"),), paths=()
    )
    assert described([elsewhere]) == ["the elsewhere API"]
    assert described([ACME]) == ["POST /acme/chat"]
    assert described([make_vendor("openai")]) == list(openai_chat.PATHS)
