"""A vendor family is declared once (docs/sdk.md, "Adding a vendor"): each family's
record names its shapes, its look, its hosts, its ready-line key, ``run``'s variables and
its SDK clients, and every table that used to repeat those facts is read from the
records: the registry, the served-with groups, the vendor a path looks like, the ready
line, ``run``'s environment and the package's lazy client names."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

import replay_actor
from replay_actor.frontdoor import environment, server
from replay_actor.serving._routes import looks_like
from replay_actor.vendors import (
    FAMILIES,
    REGISTRY,
    client_names,
    make_vendor,
    served_with,
    vendor_names,
)
from replay_actor.vendors._shape import ShapeModule
from replay_actor.vendors.anthropic import count_tokens as anthropic_count_tokens
from replay_actor.vendors.anthropic import messages as anthropic_messages
from replay_actor.vendors.cohere import chat as cohere_chat
from replay_actor.vendors.gemini import count_tokens as gemini_count_tokens
from replay_actor.vendors.gemini import embed as gemini_embed
from replay_actor.vendors.gemini import generate as gemini_generate
from replay_actor.vendors.ollama import chat as ollama_chat
from replay_actor.vendors.ollama import embed as ollama_embed
from replay_actor.vendors.ollama import generate as ollama_generate
from replay_actor.vendors.openai import chat as openai_chat
from replay_actor.vendors.openai import completions as openai_completions
from replay_actor.vendors.openai import embeddings as openai_embeddings
from replay_actor.vendors.openai import input_tokens as openai_input_tokens
from tests.support.paths import ROOT

#: mypy --strict holds every shape module to the contract a shape is made from.
MODULES: tuple[ShapeModule, ...] = (
    openai_chat,
    openai_embeddings,
    openai_completions,
    openai_input_tokens,
    anthropic_messages,
    anthropic_count_tokens,
    gemini_generate,
    gemini_embed,
    gemini_count_tokens,
    ollama_chat,
    ollama_generate,
    ollama_embed,
    cohere_chat,
)

PACKAGE = ROOT / "replay_actor"
INFO = {"url": "http://127.0.0.1:9", "token": "tok"}


def _shape_names() -> list[str]:
    return [name for family in FAMILIES for name, _ in family.shapes]


def test_the_registry_is_every_familys_shapes_each_familys_own_first() -> None:
    heads = [family.shapes[0][0] for family in FAMILIES]
    assert heads == [family.name for family in FAMILIES]  # a family's own shape: its name
    assert sorted(REGISTRY) == sorted(_shape_names())
    assert len(_shape_names()) == len(set(_shape_names()))  # no name in two families
    assert list(vendor_names()[: len(heads)]) == heads
    for name in vendor_names():
        shape = make_vendor(name)
        assert shape.name == name
        assert shape.live.adapter.endswith("Adapter")


def test_the_served_with_groups_are_the_families() -> None:
    for family in FAMILIES:
        assert served_with(family.name) == tuple(name for name, _ in family.shapes)
    # A shape that is not a family's own is served alone.
    assert served_with("openai-responses") == ("openai-responses",)
    assert served_with("made-up") == ("made-up",)


def test_every_registered_module_is_held_to_the_contract() -> None:
    # The modules above are every module the registry names (the Responses shape is
    # made by its function, and typed where it is made).
    named = {where for where in REGISTRY.values() if ":" not in where}
    assert {module.__name__ for module in MODULES} == named  # type: ignore[attr-defined]


def test_a_shape_that_remembers_is_made_afresh_every_other_is_one_value() -> None:
    assert make_vendor("openai-responses") is not make_vendor("openai-responses")
    assert make_vendor("openai") is make_vendor("openai")


@pytest.mark.parametrize(
    ("path", "headers", "family"),
    [
        ("/v1/messages/nope", (), "anthropic"),
        ("/messages/nope", (), "anthropic"),  # the spelling without /v1, canonical first
        ("/v1beta/models/m:nope", (), "gemini"),
        ("/v1/models/m:nope", (), "gemini"),
        ("/v1/models/m", ("x-goog-api-key",), "gemini"),
        ("/v1/models", ("anthropic-version",), "anthropic"),
        # A family's own path beats another's headers; headers beat a looser path.
        ("/v1/messages/x", ("x-goog-api-key",), "anthropic"),
        ("/api/tags", ("anthropic-version",), "anthropic"),
        ("/api/tags", (), "ollama"),
        ("/v1/models", (), "openai"),
        ("/nowhere", (), "openai"),
    ],
)
def test_the_vendor_a_request_looks_like_is_read_from_the_records(
    path: str, headers: tuple[str, ...], family: str
) -> None:
    assert looks_like(path, headers) == family


def test_every_look_a_record_declares_is_used() -> None:
    for family in FAMILIES:
        for header in family.headers:
            assert header == header.lower()
            assert looks_like("/nowhere", (header,)) == family.name
        if family.paths:
            assert re.compile(family.paths)
    # Nobody's look: the first family's envelope.
    assert looks_like("/nowhere") == FAMILIES[0].name


def test_every_family_names_its_real_hosts() -> None:
    hosts = [host for family in FAMILIES for host in family.hosts]
    assert all(family.hosts for family in FAMILIES)
    assert len(hosts) == len(set(hosts))
    for host in hosts:
        assert re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*\.[a-z]+", host), host
    assert {"api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"} <= set(
        hosts
    )


def test_the_ready_line_has_a_base_url_for_each_family_that_declares_one() -> None:
    keys = [family.ready[0] for family in FAMILIES if family.ready]
    assert [key for key, _ in server._READY] == keys
    assert keys[:3] == ["openai_base_url", "anthropic_base_url", "gemini_base_url"]


def test_runs_environment_is_every_familys_variables_and_the_others() -> None:
    env = environment.child_environment({"OPENAI_API_VERSION": ""}, INFO, ())
    for family in FAMILIES:
        variables = family.variables
        for variable, below in variables.base_urls:
            assert environment.BASE_URL_VARIABLES[variable] == below
            assert env[variable] == INFO["url"] + below, variable
        for key in (*variables.keys, *variables.unredirected):
            assert key in environment.KEY_VARIABLES
            assert env[key] == "tok", key
        for name in (*variables.credentials, *variables.switches):
            assert name in environment.REMOVED_VARIABLES
        for name, value in variables.defaults:
            assert env[name] == value  # an empty inherited value is no value
        if family.ready:
            key, below = family.ready
            # The variable an SDK reads names the same URL as the ready line's key.
            assert any(b == below for _, b in variables.base_urls), family.name
    # The variables of clients with no family of ours stay where they were.
    assert {"GROQ_BASE_URL", "TOGETHER_BASE_URL", "REPLAY_ACTOR_URL"} <= set(
        environment.BASE_URL_VARIABLES
    )


def test_the_front_doors_variable_table_names_every_variable_run_sets_or_removes() -> None:
    page = (ROOT / "docs" / "front-door.md").read_text(encoding="utf-8")
    table = page.split("## `replay-actor run MANIFEST", 1)[1].split("**The real key", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    every = {
        *environment.BASE_URL_VARIABLES,
        *environment.KEY_VARIABLES,
        *environment.REMOVED_VARIABLES,
        *(name for family in FAMILIES for name, _ in family.variables.defaults),
    }
    assert every - named == set()
    for family in FAMILIES:
        if family.ready:
            assert f"`{family.ready[0]}`" in page, family.name


def test_the_lazy_client_names_are_the_records() -> None:
    names = client_names()
    exported = {name for name in replay_actor.__all__ if name.endswith("_client")}
    assert set(names) == exported
    assert {name for name in replay_actor._LOCATIONS if name.endswith("_client")} == exported
    for name in names:
        value = getattr(replay_actor, name)
        assert value.__module__ == "replay_actor.integrations.sdk"
    # The names type checkers see are the same list.
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    typed = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "integrations.sdk"
        for alias in node.names
    }
    assert typed == set(names)


def test_reading_the_records_imports_no_mapping_code() -> None:
    probe = (
        "import sys; import replay_actor.vendors as v; "
        "print(len(v.FAMILIES), sorted(m for m in sys.modules if m.startswith('replay_actor.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    count, _, modules = done.stdout.partition(" ")
    assert int(count) == len(FAMILIES)
    loaded = set(ast.literal_eval(modules))
    for where in REGISTRY.values():
        assert where.partition(":")[0] not in loaded, where


def test_nothing_outside_vendors_imports_a_private_module_of_vendors() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "vendors"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if "vendors" in parts:
                    below = parts[parts.index("vendors") + 1 :]
                    if any(part.startswith("_") for part in below):
                        offenders.append(f"{path.relative_to(ROOT)}: {node.module}")
    assert offenders == []
