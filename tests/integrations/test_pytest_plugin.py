"""The pytest plugin, run by pytest itself (``pytester``): markers, ini option, modes,
failures and the terminal summary, with the real SDK clients."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ManifestError, load_fixture, request_hash
from replay_actor.fixture import entry_line
from replay_actor.integrations.pytest_plugin import provider_mapping
from tests.support.chat_server import ChatServer

pytest_plugins = ["pytester"]

MISS = "no replay fixture matches this request"
HI = {"messages": [{"role": "user", "content": "hi"}]}
BYE = {"messages": [{"role": "user", "content": "bye"}]}


def write_fixture(path: Path, entries: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for digest, answer in entries.items():
        if isinstance(answer, list):
            line = json.dumps({"schema_version": 1, "request_hash": digest, "responses": answer})
            lines.append(line.encode() + b"\n")
        else:
            lines.append(entry_line(digest, answer) + b"\n")
    path.write_bytes(b"".join(lines))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_fixture(
        pytester.path / "fixtures" / "chat.jsonl",
        {
            request_hash(HI): {"content": "hello", "finish_reason": "stop"},
            request_hash(BYE): [{"content": "bye 1"}, {"content": "bye 2"}],
            # What the Anthropic SDK asks for "hi" (max_tokens is required there).
            request_hash({**HI, "params": {"max_tokens": 16}}): {"content": "hello"},
        },
    )
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # deepeval (the evals extra) brings its own plugin and pytest-asyncio's: not ours.
    quiet = ("-p", "no:deepeval", "-p", "no:asyncio")
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *quiet, *args)


@pytest.mark.timeout(120)
def test_marker_fixture_passes_and_summarises(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest

        HI = {"messages": [{"role": "user", "content": "hi"}]}

        @pytest.mark.replay(fixture="fixtures/chat.jsonl")
        def test_hi(replay_provider):
            assert replay_provider.complete(HI)["content"] == "hello"
            assert replay_provider.complete(HI)["content"] == "hello"
        """
    )
    result = run(project)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*- replay-actor -*",
            "fixtures/chat.jsonl (replay): 2 calls, 0 misses, 0 exhausted sequences, "
            "2 unused entries",
        ]
    )


@pytest.mark.timeout(120)
def test_a_miss_fails_the_test_with_the_message(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest
        from replay_actor import ReplayMiss

        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl")
        UNKNOWN = {"messages": [{"role": "user", "content": "never recorded"}]}

        def test_raised(replay_provider):
            replay_provider.complete(UNKNOWN)

        def test_swallowed(replay_provider):
            try:
                replay_provider.complete(UNKNOWN)
            except ReplayMiss:
                pass  # an application that falls back must not pass the test

        def test_bye(replay_provider):
            assert replay_provider.complete({"messages": [{"role": "user", "content": "bye"}]})
        """
    )
    digest = request_hash({"messages": [{"role": "user", "content": "never recorded"}]})
    result = run(project)
    result.assert_outcomes(failed=2, passed=1)
    message = f"{MISS} (request_hash: {digest})"
    result.stdout.fnmatch_lines([f"*ReplayMiss: {message}*"])
    result.stdout.fnmatch_lines([f"replay-actor: {message}"])
    result.stdout.fnmatch_lines(
        ["fixtures/chat.jsonl (replay): 3 calls, 2 misses, 0 exhausted sequences, 2 unused entries"]
    )


@pytest.mark.timeout(120)
def test_exhausted_sequences_are_counted(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest

        BYE = {"messages": [{"role": "user", "content": "bye"}]}

        @pytest.mark.replay(fixture="fixtures/chat.jsonl")
        def test_bye(replay_provider):
            answers = [replay_provider.complete(BYE)["content"] for _ in range(2)]
            assert answers == ["bye 1", "bye 2"]
            replay_provider.complete(BYE)
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*replay sequence exhausted for this request (request_hash: *"])
    result.stdout.fnmatch_lines(
        ["fixtures/chat.jsonl (replay): 3 calls, 0 misses, 1 exhausted sequences, 2 unused entries"]
    )


@pytest.mark.timeout(120)
def test_each_test_has_its_own_acquisition(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest

        BYE = {"messages": [{"role": "user", "content": "bye"}]}
        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl")

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_sequence_starts_afresh(replay_provider, n):
            assert replay_provider.complete(BYE)["content"] == "bye 1"
        """
    )
    run(project).assert_outcomes(passed=3)


@pytest.mark.timeout(120)
def test_sdk_clients_share_the_test_provider(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import openai
        import pytest

        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl")

        def test_openai(replay_openai, replay_provider):
            r = replay_openai.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "hi"}]
            )
            assert r.choices[0].message.content == "hello"
            assert replay_provider.snapshot()["served"] == 1

        def test_anthropic(replay_anthropic):
            r = replay_anthropic.messages.create(
                model="any", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            )
            assert r.content[0].text == "hello"

        def test_openai_miss(replay_openai):
            replay_openai.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "nope"}]
            )
        """
    )
    result = run(project)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([f"*NotFoundError*{MISS} (request_hash: sha256:*"])


@pytest.mark.timeout(120)
def test_private_fixture_prints_no_hash(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest

        BYE = {"messages": [{"role": "user", "content": "bye"}]}
        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl", private=True)

        def test_miss(replay_provider):
            replay_provider.complete({"messages": [{"role": "user", "content": "secret"}]})

        async def run(provider):
            return await provider.acomplete({"messages": [{"role": "user", "content": "secret"}]})

        def test_async_miss(replay_provider):
            import asyncio
            asyncio.run(run(replay_provider))

        def test_exhausted(replay_provider):
            for _ in range(3):
                replay_provider.complete(BYE)
        """
    )
    # --showlocals prints every frame's locals: none may hold a hash.
    result = run(project, "--showlocals", "--tb=long")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    for request in ({"messages": [{"role": "user", "content": "secret"}]}, BYE):
        digest = request_hash(request)
        assert digest.removeprefix("sha256:")[:16] not in out
    assert "sha256:" not in out
    result.stdout.fnmatch_lines([f"*ReplayMiss: {MISS}"])
    result.stdout.fnmatch_lines(["*SequenceExhausted: replay sequence exhausted for this request"])


@pytest.mark.timeout(120)
def test_ini_manifest_relative_to_the_ini_file(project: pytest.Pytester, no_leaks: None) -> None:
    (project.path / "replay.toml").write_text(
        '[provider]\nkind = "replay"\nfixture = "fixtures/chat.jsonl"\n'
    )
    project.makeini("[pytest]\nreplay_manifest = replay.toml\n")
    sub = project.mkdir("tests")
    (sub / "test_app.py").write_text(
        textwrap.dedent(
            """
            def test_hi(replay_provider):
                r = replay_provider.complete({"messages": [{"role": "user", "content": "hi"}]})
                assert r["content"] == "hello"
            """
        )
    )
    result = run(project)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["fixtures/chat.jsonl (replay): 1 calls, 0 misses, *"])


@pytest.mark.timeout(120)
def test_no_manifest_is_a_clear_error(pytester: pytest.Pytester, no_leaks: None) -> None:
    pytester.makepyfile(test_app="def test_x(replay_provider):\n    pass\n")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*has no @pytest.mark.replay(manifest=... | fixture=...)*"])


@pytest.mark.timeout(180)
def test_record_mode_then_replay_with_the_server_stopped(
    pytester: pytest.Pytester, no_leaks: None
) -> None:
    server = ChatServer()
    (pytester.path / "eval.toml").write_text(
        textwrap.dedent(
            f"""
            [provider]
            kind = "record"
            fixture = "fixtures/recorded.jsonl"

            [provider.live]
            adapter = "openai"
            model = "m"
            base_url = "{server.base_url()}"
            max_retries = 0
            """
        )
    )
    pytester.makepyfile(
        test_app="""
        import json, os
        import pytest

        @pytest.mark.replay(manifest="eval.toml")
        def test_chat(replay_openai):
            r = replay_openai.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            with open("answers.txt", "a") as out:
                out.write(r.choices[0].message.content + "\\n")
        """
    )
    try:
        replay_first = run(pytester, "--replay-mode=replay")
        replay_first.assert_outcomes(errors=1)  # nothing recorded yet, and no live call
        replay_first.stdout.fnmatch_lines(["*fixture rejected: file_missing*"])
        assert server.count("echo") == 0
        recorded = run(pytester, "--replay-mode=record")
        recorded.assert_outcomes(passed=1)
        recorded.stdout.fnmatch_lines(
            [
                "fixtures/recorded.jsonl (record): 1 calls, 0 misses, 0 exhausted sequences, "
                "1 recorded, 0 unused entries"
            ]
        )
    finally:
        server.close()
    assert server.count("echo") == 1
    assert load_fixture(pytester.path / "fixtures" / "recorded.jsonl").snapshot()["entries"] == 1
    replayed = run(pytester, "--replay-mode=replay")
    replayed.assert_outcomes(passed=1)
    answers = (pytester.path / "answers.txt").read_text().splitlines()
    assert answers == ["1: hi", "1: hi"]


@pytest.mark.timeout(120)
def test_fixture_marker_cannot_record(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest

        @pytest.mark.replay(fixture="fixtures/chat.jsonl")
        def test_x(replay_provider):
            pass
        """
    )
    result = run(project, "--replay-mode=record")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--replay-mode=record needs a record manifest*"])


# -- switching a manifest's kind ------------------------------------------------------------


def test_record_manifest_switches_to_every_mode(tmp_path: Path) -> None:
    manifest = tmp_path / "eval.toml"
    manifest.write_text(
        '[provider]\nkind = "record"\nfixture = "f.jsonl"\ndata = "private"\n'
        '[provider.live]\nadapter = "openai"\nmodel = "m"\n'
    )
    fixture = str(tmp_path / "f.jsonl")
    assert provider_mapping(manifest, "replay") == {
        "provider": {"kind": "replay", "fixture": fixture, "data": "private"}
    }
    assert provider_mapping(manifest, "live") == {
        "provider": {"kind": "live", "adapter": "openai", "model": "m"}
    }
    assert provider_mapping(manifest, None)["provider"]["fixture"] == fixture
    assert provider_mapping(manifest, "record")["provider"]["kind"] == "record"


@pytest.mark.parametrize(("kind", "mode"), [("replay", "record"), ("replay", "live")])
def test_replay_manifest_cannot_record_or_go_live(tmp_path: Path, kind: str, mode: str) -> None:
    manifest = tmp_path / "eval.toml"
    manifest.write_text(f'[provider]\nkind = "{kind}"\nfixture = "f.jsonl"\n')
    with pytest.raises(ManifestError, match="needs a record manifest"):
        provider_mapping(manifest, mode)


def test_live_manifest_cannot_replay(tmp_path: Path) -> None:
    manifest = tmp_path / "eval.toml"
    manifest.write_text('[provider]\nkind = "live"\nadapter = "openai"\nmodel = "m"\n')
    with pytest.raises(ManifestError, match="needs a fixture"):
        provider_mapping(manifest, "replay")


@pytest.mark.timeout(120)
def test_plugin_can_be_turned_off(project: pytest.Pytester) -> None:
    project.makepyfile(test_app="def test_x(replay_provider):\n    pass\n")
    result = run(project, "-p", "no:replay_actor")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'replay_provider' not found*"])


# -- issue 17, items 22-24: a swallowed miss is never green, a missing fixture names its path


@pytest.mark.timeout(120)
def test_a_miss_swallowed_in_a_fixture_teardown_fails(
    project: pytest.Pytester, no_leaks: None
) -> None:
    project.makepyfile(
        test_app="""
        import pytest
        from replay_actor import ReplayMiss

        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl")
        UNKNOWN = {"messages": [{"role": "user", "content": "asked at teardown"}]}

        @pytest.fixture
        def session(replay_provider):
            yield replay_provider
            try:
                replay_provider.complete(UNKNOWN)  # e.g. a summary call at the end
            except ReplayMiss:
                pass

        @pytest.fixture
        def warmed(replay_provider):
            try:
                replay_provider.complete(UNKNOWN)  # swallowed while setting up
            except ReplayMiss:
                pass
            return replay_provider

        def test_teardown(session):
            assert session.complete({"messages": [{"role": "user", "content": "hi"}]})

        def test_setup(warmed):
            pass
        """
    )
    digest = request_hash({"messages": [{"role": "user", "content": "asked at teardown"}]})
    result = run(project)
    # The teardown miss: the test itself passed, its teardown errors with the message.
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_teardown*"])
    result.stdout.fnmatch_lines(["*ERROR at setup of test_setup*"])
    result.stdout.fnmatch_lines([f"replay-actor: {MISS} (request_hash: {digest})"])


@pytest.mark.timeout(120)
def test_a_swallowed_miss_then_skip_is_not_green(project: pytest.Pytester, no_leaks: None) -> None:
    project.makepyfile(
        test_app="""
        import pytest
        from replay_actor import ReplayMiss

        pytestmark = pytest.mark.replay(fixture="fixtures/chat.jsonl")

        def test_skipped_after_a_miss(replay_provider):
            try:
                replay_provider.complete({"messages": [{"role": "user", "content": "nope"}]})
            except ReplayMiss:
                pytest.skip("the model is not available")

        def test_plain_skip(replay_provider):
            pytest.skip("nothing asked: still a skip")

        @pytest.mark.xfail(reason="a known miss", strict=True)
        def test_expected_miss(replay_provider):
            replay_provider.complete({"messages": [{"role": "user", "content": "nope"}]})
        """
    )
    result = run(project)
    result.assert_outcomes(failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["FAILED test_app.py::test_skipped_after_a_miss*"])
    result.stdout.fnmatch_lines([f"replay-actor: {MISS} (request_hash: *)"])


@pytest.mark.timeout(120)
def test_a_missing_fixture_names_the_path_tried(pytester: pytest.Pytester, no_leaks: None) -> None:
    pytester.makepyfile(
        test_app="""
        import pytest

        @pytest.mark.replay(fixture="fixtures/typo.jsonl")
        def test_x(replay_provider):
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(errors=1)
    tried = pytester.path / "fixtures" / "typo.jsonl"
    result.stdout.fnmatch_lines([f"*fixture rejected: file_missing (fixture: {tried})*"])
