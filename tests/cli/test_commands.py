"""The ``replay-actor`` CLI (docs/cli.md): every command, every exit code, the boundaries.

Most tests call ``main([...])`` in-process and read the exit code and captured output;
a few run ``python -m replay_actor`` as a real subprocess to prove the entry point.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import replay_actor
from replay_actor import entry_line, load_fixture
from replay_actor._request import canonical_request, request_hash
from replay_actor.cli import main
from tests.support.paths import ROOT as REPO

EXAMPLES = REPO / "examples"
PACKAGE_PARENT = str(Path(replay_actor.__file__).resolve().parent.parent)

SECRET = "TOPSECRET-9f2c-do-not-leak"

HIT_REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}
SEQ_REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "next step?"}]}
MISS_REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "never recorded"}]}
HIT_RESPONSE: dict[str, Any] = {"content": "hi there", "finish_reason": "stop"}
SEQ_RESPONSES: list[dict[str, Any]] = [{"content": "one"}, {"content": "two"}]

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Call ``main`` in-process; return (exit code, stdout, stderr)."""

    def _run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return _run


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Callable[[bytes], None]:
    def _set(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    return _set


def _write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    lines = [
        entry_line(request_hash(HIT_REQUEST), response=HIT_RESPONSE),
        entry_line(request_hash(SEQ_REQUEST), responses=SEQ_RESPONSES),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def secret_fixture(tmp_path: Path) -> Path:
    """A fixture whose rejected lines carry a planted secret, in a key and in a value."""
    good = entry_line(request_hash(HIT_REQUEST), response=HIT_RESPONSE).decode()
    bad_key = good[:-1] + f',"{SECRET}":1}}'  # unknown_key at line 2
    bad_json = '{"response": "' + SECRET + '", oops}'  # invalid_json at line 4
    path = tmp_path / "secret.jsonl"
    path.write_text(f"{good}\n{bad_key}\n\n{bad_json}\n", encoding="utf-8")
    return path


def _python_m(*argv: str, stdin_bytes: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    # PYTHONPATH pins the subprocess to the code this test process imported.
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    return subprocess.run(
        [sys.executable, "-m", "replay_actor", *argv],
        input=stdin_bytes,
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )


# -- general -------------------------------------------------------------------------------


def test_version(run: Run) -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert out.strip() == f"replay-actor {replay_actor.__version__}"


@pytest.mark.parametrize("command", ["validate", "hash", "inspect", "lookup", "stub"])
def test_every_command_has_help_with_an_example(run: Run, command: str) -> None:
    code, out, _ = run(command, "--help")
    assert code == 0
    assert "example:" in out
    assert f"replay-actor {command}" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["validate"],
        ["inspect"],
        ["lookup"],
        ["stub", "sha256:" + "0" * 64],
        ["stub", "sha256:" + "0" * 64, "--content", "a", "--response", "f.json"],
        ["validate", "--ceiling", "max_nonsense=3", "f.jsonl"],
        ["validate", "--ceiling", "max_entries=many", "f.jsonl"],
    ],
)
def test_usage_errors_exit_2(run: Run, argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2
    assert out == ""
    assert "usage:" in err


def test_ceiling_out_of_range_is_a_usage_error(run: Run, fixture_path: Path) -> None:
    code, _, err = run("validate", "--ceiling", "max_sequence_length=2048", str(fixture_path))
    assert code == 2
    assert err.startswith("replay-actor: error: ")
    assert "Traceback" not in err


# -- validate ------------------------------------------------------------------------------


def test_validate_valid(run: Run, fixture_path: Path) -> None:
    code, out, err = run("validate", str(fixture_path))
    assert code == 0
    assert out == "1 file checked: 1 valid, 0 rejected (0 rejections)\n"
    assert err == ""


def test_validate_lists_every_rejection_and_whole_file_rules(
    run: Run, fixture_path: Path, secret_fixture: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, _ = run("validate", str(secret_fixture), str(fixture_path), str(missing))
    assert code == 1
    assert out.splitlines() == [
        f"{secret_fixture}:2: unknown_key",
        f"{secret_fixture}:4: invalid_json",
        f"{missing}: file_missing",
        "3 files checked: 1 valid, 2 rejected (3 rejections)",
    ]


def test_validate_json_shape(
    run: Run, fixture_path: Path, secret_fixture: Path, tmp_path: Path
) -> None:
    code, out, _ = run("validate", "--json", str(fixture_path), str(secret_fixture), str(tmp_path))
    assert code == 1
    assert json.loads(out) == {
        "valid": False,
        "files": [
            {"fixture": str(fixture_path), "valid": True, "rejections": []},
            {
                "fixture": str(secret_fixture),
                "valid": False,
                "rejections": [
                    {"reason": "unknown_key", "line": 2},
                    {"reason": "invalid_json", "line": 4},
                ],
            },
            {
                "fixture": str(tmp_path),
                "valid": False,
                "rejections": [{"reason": "not_regular_file", "line": None}],
            },
        ],
    }


def test_validate_json_all_valid(run: Run, fixture_path: Path) -> None:
    code, out, _ = run("validate", "--json", str(fixture_path))
    assert code == 0
    assert json.loads(out)["valid"] is True


def test_validate_honours_ceilings(run: Run, fixture_path: Path) -> None:
    code, out, _ = run("validate", "--ceiling", "max_entries=1", str(fixture_path))
    assert code == 1
    assert out.splitlines()[0] == f"{fixture_path}:2: too_many_entries"


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{path}"],
        ["validate", "--json", "{path}"],
        ["inspect", "{path}"],
        ["lookup", "{path}", "{request}"],
        ["lookup", "--private", "{path}", "{request}"],
    ],
)
def test_a_rejected_line_never_reaches_the_output(
    run: Run, secret_fixture: Path, tmp_path: Path, argv: list[str]
) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    args = [a.format(path=secret_fixture, request=request) for a in argv]
    code, out, err = run(*args)
    assert code == 1
    assert SECRET not in out + err
    assert "oops" not in out + err
    assert "Traceback" not in err


# -- hash ----------------------------------------------------------------------------------


def test_hash_file(run: Run, tmp_path: Path) -> None:
    path = _write_json(tmp_path / "req.json", HIT_REQUEST)
    code, out, err = run("hash", str(path))
    assert (code, out, err) == (0, request_hash(HIT_REQUEST) + "\n", "")


@pytest.mark.parametrize("argv", [["hash"], ["hash", "-"]])
def test_hash_stdin(run: Run, stdin: Callable[[bytes], None], argv: list[str]) -> None:
    stdin(json.dumps(HIT_REQUEST).encode())
    code, out, _ = run(*argv)
    assert code == 0
    assert out == request_hash(HIT_REQUEST) + "\n"


def test_hash_canonical_bytes_are_what_is_hashed(
    capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    request = {"params": {"temperature": 1.0}, "messages": [{"role": "user", "content": "é"}]}
    path = _write_json(tmp_path / "req.json", request)
    assert main(["hash", "--canonical", str(path)]) == 0
    out = capsysbinary.readouterr().out
    assert out == canonical_request(request)  # exact bytes: no newline when not a tty
    assert "sha256:" + hashlib.sha256(out).hexdigest() == request_hash(request)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b'{"messages": [], "' + SECRET.encode() + b'": 1}', "invalid request"),
        (b'{"messages": "' + SECRET.encode() + b'", ', "not valid JSON (line 1"),
        (b'{"messages": 1, "messages": "' + SECRET.encode() + b'"}', "repeated"),
        (b'{"messages": NaN, "x": "' + SECRET.encode() + b'"}', "NaN"),
        (b'\xef\xbb\xbf{"messages": "' + SECRET.encode() + b'"}', "not valid JSON"),
        (b'{"messages": "' + SECRET.encode() + b'\xff"}', "not valid UTF-8"),
        (b"[" * 100_000 + SECRET.encode(), "not valid JSON"),
    ],
)
def test_hash_invalid_input_exits_1_without_echoing_it(
    run: Run, stdin: Callable[[bytes], None], payload: bytes, fragment: str
) -> None:
    stdin(payload)
    code, out, err = run("hash")
    assert code == 1
    assert out == ""
    assert err.startswith("replay-actor: error: <stdin>: ")
    assert fragment in err
    assert len(err.splitlines()) == 1
    if fragment != "invalid request":  # an unknown field is named; a value never is
        assert SECRET not in err


def test_hash_invalid_request_from_file(run: Run, tmp_path: Path) -> None:
    path = _write_json(tmp_path / "req.json", {"messages": [{"role": "robot"}]})
    code, out, err = run("hash", str(path))
    assert code == 1
    assert out == ""
    assert err.startswith(f"replay-actor: error: {path}: invalid request")


def test_hash_unreadable_file(run: Run, tmp_path: Path) -> None:
    code, _, err = run("hash", str(tmp_path / "absent.json"))
    assert code == 1
    assert err == f"replay-actor: error: {tmp_path / 'absent.json'}: cannot read request: " + (
        "No such file or directory\n"
    )


# -- inspect -------------------------------------------------------------------------------


def test_inspect_prints_the_safe_snapshot(run: Run, fixture_path: Path) -> None:
    code, out, err = run("inspect", str(fixture_path))
    assert code == 0
    assert err == ""
    snapshot = json.loads(out)
    assert snapshot == load_fixture(fixture_path).snapshot()
    assert snapshot["entries"] == 2
    assert snapshot["sequence_entries"] == 1
    for request in (HIT_REQUEST, SEQ_REQUEST):
        assert request_hash(request) not in out
    assert "hi there" not in out
    assert str(fixture_path) not in out


def test_inspect_rejected(run: Run, secret_fixture: Path) -> None:
    code, out, err = run("inspect", str(secret_fixture))
    assert code == 1
    assert out == ""
    assert err == f"replay-actor: error: {secret_fixture}: rejected: unknown_key at line 2\n"


def test_inspect_whole_file_rejection(run: Run, tmp_path: Path) -> None:
    code, _, err = run("inspect", str(tmp_path / "nope.jsonl"))
    assert code == 1
    assert err == f"replay-actor: error: {tmp_path / 'nope.jsonl'}: rejected: file_missing\n"


def test_inspect_honours_ceilings(run: Run, fixture_path: Path) -> None:
    code, out, _ = run("inspect", "--ceiling", "max_entries=5", str(fixture_path))
    assert code == 0
    assert json.loads(out)["ceilings"]["max_entries"] == 5


# -- lookup --------------------------------------------------------------------------------


def test_lookup_hit(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    code, out, err = run("lookup", str(fixture_path), str(request))
    assert (code, err) == (0, "")
    assert json.loads(out) == HIT_RESPONSE


def test_lookup_compact(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    code, out, _ = run("lookup", "--compact", str(fixture_path), str(request))
    assert code == 0
    assert out == '{"content":"hi there","finish_reason":"stop"}\n'


def test_lookup_stdin(run: Run, fixture_path: Path, stdin: Callable[[bytes], None]) -> None:
    stdin(json.dumps(HIT_REQUEST).encode())
    code, out, _ = run("lookup", str(fixture_path))
    assert code == 0
    assert json.loads(out) == HIT_RESPONSE


def test_lookup_sequence_answers_its_first_element_every_time(
    run: Run, fixture_path: Path, tmp_path: Path
) -> None:
    request = _write_json(tmp_path / "req.json", SEQ_REQUEST)
    for _ in range(3):  # each call is a fresh acquisition: no cursor carries over
        code, out, _ = run("lookup", str(fixture_path), str(request))
        assert code == 0
        assert json.loads(out) == SEQ_RESPONSES[0]


def test_lookup_miss(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", MISS_REQUEST)
    code, out, err = run("lookup", str(fixture_path), str(request))
    assert code == 3
    assert out == ""
    digest = request_hash(MISS_REQUEST)
    assert err == f"no replay fixture matches this request (request_hash: {digest})\n"


def test_lookup_private_miss_prints_no_hash(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", MISS_REQUEST)
    code, out, err = run("lookup", "--private", str(fixture_path), str(request))
    assert code == 3
    assert err == (
        "no replay fixture matches this request\n"
        "replay-actor: note: private data: the request hash is withheld; --inspection PATH "
        "records it in an owner-only file\n"
    )
    digest = request_hash(MISS_REQUEST)
    assert "sha256:" not in out + err
    assert digest.removeprefix("sha256:") not in out + err


def test_lookup_private_hit_prints_no_hash(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    code, out, err = run("lookup", "--private", str(fixture_path), str(request))
    assert code == 0
    assert "sha256:" not in out + err


@pytest.mark.parametrize("private", [False, True])
def test_lookup_inspection_record(
    run: Run, fixture_path: Path, tmp_path: Path, private: bool
) -> None:
    request = _write_json(tmp_path / "req.json", MISS_REQUEST)
    record = tmp_path / "state" / "misses.jsonl"
    record.parent.mkdir()
    flags = ["--private"] if private else []
    for _ in range(2):
        code, out, err = run(
            "lookup", *flags, "--inspection", str(record), str(fixture_path), str(request)
        )
        assert code == 3
        if private:
            assert "sha256:" not in out + err
            assert f"it is in the owner-only record {record}" in err
    digest = request_hash(MISS_REQUEST)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines == [{"event": "miss", "request_hash": digest, "call": 1}] * 2
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


def test_lookup_inspection_hit_records_nothing(
    run: Run, fixture_path: Path, tmp_path: Path
) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    record = tmp_path / "misses.jsonl"
    code, _, _ = run("lookup", "--inspection", str(record), str(fixture_path), str(request))
    assert code == 0
    assert record.read_bytes() == b""


def test_lookup_inspection_refuses_a_symlink(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", MISS_REQUEST)
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched\n")
    link = tmp_path / "misses.jsonl"
    link.symlink_to(target)
    code, out, err = run(
        "lookup", "--private", "--inspection", str(link), str(fixture_path), str(request)
    )
    assert code == 1
    assert out == ""
    assert err.startswith("replay-actor: error: ")
    assert "symbolic link" in err
    assert "sha256:" not in err
    assert target.read_text() == "untouched\n"


def test_lookup_rejected_fixture(run: Run, secret_fixture: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", HIT_REQUEST)
    code, out, err = run("lookup", str(secret_fixture), str(request))
    assert code == 1
    assert out == ""
    assert err == f"replay-actor: error: {secret_fixture}: rejected: unknown_key at line 2\n"


def test_lookup_invalid_request(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    request = _write_json(tmp_path / "req.json", {"messages": []})
    code, out, err = run("lookup", "--private", str(fixture_path), str(request))
    assert code == 1
    assert out == ""
    assert "invalid request" in err
    assert "sha256:" not in err


def test_lookup_request_not_json(
    run: Run, fixture_path: Path, stdin: Callable[[bytes], None]
) -> None:
    stdin(b"{" + SECRET.encode())
    code, _, err = run("lookup", str(fixture_path), "-")
    assert code == 1
    assert SECRET not in err
    assert "not valid JSON" in err


# -- stub ----------------------------------------------------------------------------------


def _load_line(tmp_path: Path, line: str) -> list[dict[str, Any]] | None:
    path = tmp_path / "stub.jsonl"
    path.write_text(line, encoding="utf-8")
    digest = json.loads(line)["request_hash"]
    return load_fixture(path).responses_for(digest)


def test_stub_content(run: Run, tmp_path: Path) -> None:
    digest = request_hash(MISS_REQUEST)
    code, out, err = run("stub", digest, "--content", "Paris, ünïcode")
    assert (code, err) == (0, "")
    assert out.endswith("}\n")
    assert out.count("\n") == 1
    assert _load_line(tmp_path, out) == [{"content": "Paris, ünïcode"}]


def test_stub_response_file(run: Run, tmp_path: Path) -> None:
    response = {"content": None, "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]}
    path = _write_json(tmp_path / "answer.json", response)
    code, out, _ = run("stub", request_hash(MISS_REQUEST), "--response", str(path))
    assert code == 0
    assert _load_line(tmp_path, out) == [response]


def test_stub_response_stdin(run: Run, tmp_path: Path, stdin: Callable[[bytes], None]) -> None:
    stdin(b'{"content": "from stdin"}')
    code, out, _ = run("stub", request_hash(MISS_REQUEST), "--response", "-")
    assert code == 0
    assert _load_line(tmp_path, out) == [{"content": "from stdin"}]


@pytest.mark.parametrize(
    "bad",
    [
        "sha256:" + "0" * 63,
        "sha256:" + "A" * 64,
        "sha1:" + "0" * 64,
        "0" * 64,
        "sha256:" + "0" * 64 + " ",
    ],
)
def test_stub_malformed_hash_exits_2(run: Run, bad: str) -> None:
    code, out, err = run("stub", bad, "--content", "x")
    assert code == 2
    assert out == ""
    assert "64 lowercase hexadecimal" in err


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b'["not", "an", "object"]', "must be a JSON object"),
        (b'{"content": ', "not valid JSON"),
        (b'{"n": 1e400}', "cannot build the entry"),
        (b"[" * 70 + b"]" * 70, "must be a JSON object"),
        (b'{"a":' * 70 + b"1" + b"}" * 70, "nesting_too_deep"),
    ],
)
def test_stub_invalid_response_exits_1(
    run: Run, stdin: Callable[[bytes], None], payload: bytes, fragment: str
) -> None:
    stdin(payload)
    code, out, err = run("stub", request_hash(MISS_REQUEST), "--response", "-")
    assert code == 1
    assert out == ""
    assert fragment in err
    assert "Traceback" not in err


def test_authoring_loop(run: Run, fixture_path: Path, tmp_path: Path) -> None:
    """Miss -> read the hash -> stub -> append -> the same lookup now hits."""
    request = _write_json(tmp_path / "req.json", MISS_REQUEST)
    code, _, err = run("lookup", str(fixture_path), str(request))
    assert code == 3
    digest = err.rsplit("request_hash: ", 1)[1].rstrip(")\n")
    code, line, _ = run("stub", digest, "--content", "now recorded")
    assert code == 0
    with fixture_path.open("a", encoding="utf-8") as handle:
        handle.write(line)
    assert run("validate", str(fixture_path))[0] == 0
    code, out, _ = run("lookup", str(fixture_path), str(request))
    assert code == 0
    assert json.loads(out) == {"content": "now recorded"}


# -- the bundled examples ------------------------------------------------------------------


def test_example_fixture_is_generated_from_the_example_requests() -> None:
    spec = importlib.util.spec_from_file_location(
        "_example_generate", EXAMPLES / "fixtures" / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (EXAMPLES / "fixtures" / "baseline.jsonl").read_bytes() == module.render()


def test_example_fixture_answers_the_example_requests(run: Run) -> None:
    fixture = str(EXAMPLES / "fixtures" / "baseline.jsonl")
    assert run("validate", fixture)[0] == 0
    snapshot = json.loads(run("inspect", fixture)[1])
    assert snapshot["single_entries"] >= 2
    assert snapshot["sequence_entries"] == 1
    requests = sorted((EXAMPLES / "request-files").glob("*.json"))
    codes = {path.name: run("lookup", fixture, str(path))[0] for path in requests}
    assert codes.pop("unknown.json") == 3
    assert codes
    assert set(codes.values()) == {0}


# -- the real entry point ------------------------------------------------------------------


def test_subprocess_version() -> None:
    proc = _python_m("--version")
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"replay-actor {replay_actor.__version__}"


def test_subprocess_hash_from_stdin() -> None:
    proc = _python_m("hash", stdin_bytes=json.dumps(HIT_REQUEST).encode())
    assert proc.returncode == 0
    assert proc.stdout.decode() == request_hash(HIT_REQUEST) + "\n"


def test_subprocess_lookup_miss_and_private(fixture_path: Path) -> None:
    body = json.dumps(MISS_REQUEST).encode()
    proc = _python_m("lookup", str(fixture_path), stdin_bytes=body)
    assert proc.returncode == 3
    assert request_hash(MISS_REQUEST).encode() in proc.stderr
    proc = _python_m("lookup", "--private", str(fixture_path), "-", stdin_bytes=body)
    assert proc.returncode == 3
    assert proc.stderr.startswith(b"no replay fixture matches this request\n")
    assert b"the request hash is withheld" in proc.stderr
    assert b"sha256:" not in proc.stdout + proc.stderr


def test_subprocess_rejections_and_usage(secret_fixture: Path) -> None:
    proc = _python_m("validate", str(secret_fixture))
    assert proc.returncode == 1
    assert SECRET.encode() not in proc.stdout + proc.stderr
    proc = _python_m("hash", stdin_bytes=b"{" + SECRET.encode())
    assert proc.returncode == 1
    assert SECRET.encode() not in proc.stderr
    assert b"Traceback" not in proc.stderr
    proc = _python_m("stub", "sha256:nothex", "--content", "x")
    assert proc.returncode == 2
