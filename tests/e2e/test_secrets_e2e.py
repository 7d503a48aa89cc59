"""No API key in anything the simulator writes, whatever its spelling, over real
processes and real files.

Each case drives ``zread-sim record --out CASSETTE -- python -m simulator config
--stdio --journal JOURNAL`` one line at a time, as a client does (each line answered by
one event or one control response before the next is sent), under a temporary HOME;
then runs ``zread-sim journal JOURNAL`` and ``zread-sim check CASSETTE``. Then every
byte is searched for the key in any JSON spelling (raw, ``\\uXXXX`` in either case,
short escapes, escaped again), with a pattern written here apart from the code: the
journal, the cassette (its base64 lines decoded), every other file under the temporary
directory but the ones the test wrote itself (a ``config.yaml`` in HOME, a scenario),
the recorder's stderr (its report, and the simulator's own stderr, which it passes
through), the control frames on stdout, and the tools' output. Only the events on
stdout may show the key: they are zread's output, and keep what zread shows. A peer on
a control socket is answered without the key too.
"""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.helpers import Proc

SECRET = "sk-E2E-0123-Secret"
ESCAPED = "sk-E2E-0123-\\u0053ecret"
"""The key with a character escaped, as a client's JSON encoder may write it."""
SIM = [sys.executable, "-m", "simulator"]
DEADLINE = 30.0


def any_spelling(value: str) -> re.Pattern[bytes]:
    """Each character raw, or a ``\\u`` escape (either case) or a short escape behind
    any number of backslashes."""
    parts = []
    for char in value:
        hexes = "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in f"{ord(char):04x}")
        alternatives = [re.escape(char), r"\\+u" + hexes]
        if char in '/"\\':
            alternatives.append(r"\\+" + re.escape(char))
        parts.append("(?:" + "|".join(alternatives) + ")")
    return re.compile("".join(parts).encode())


LEAK = any_spelling(SECRET)


def control(request_id: str, **request: object) -> bytes:
    frame = {"type": "control_request", "request_id": request_id, "request": request}
    return json.dumps(frame, separators=(",", ":")).encode()


def update(name: str, value: str) -> bytes:
    """``update_fields`` setting ``name``, spelled as given (escapes kept as written)."""
    return (
        '{"type":"update_fields","params":{"fields":{"' + name + '":"' + value + '"}}}'
    ).encode()


QUIT = b'{"type":"quit"}'


@dataclass
class Case:
    lines: list[bytes]
    control: bool = False
    config_yaml: bool = False
    scenario: bool = False
    shown: bool = True
    """Whether zread's events show the key (the test asserts they do)."""
    expect_in_stderr: list[str] = field(default_factory=list)


CASES = {
    "escaped name": Case(
        [
            update("llm_\\u0061pi_key", SECRET),
            b'{"type":"nope","note":"' + SECRET.encode() + b'"}',  # known now: by value
            b"not json at all: " + SECRET.encode(),
            QUIT,
        ]
    ),
    "escaped value": Case(
        [
            update("llm_api_key", ESCAPED),
            b'{"type":"nope","note":"' + ESCAPED.encode() + b'"}',
            QUIT,
        ]
    ),
    "upper-case name": Case([update("LLM_API_KEY", SECRET), QUIT], shown=False),
    "single quotes": Case(
        [
            b"{'type':'update_fields','params':{'fields':{'llm_api_key':'"
            + SECRET.encode()
            + b"'}}}",
            b"{'note': '" + SECRET.encode() + b"'}",
            QUIT,
        ],
        shown=False,
    ),
    "truncated JSON and bytes that are not UTF-8": Case(
        [
            b'{"type":"update_fields","params":{"fields":{"llm_api_key":"' + SECRET.encode(),
            b'{"type":"nope","llm_api_key":"' + SECRET.encode() + b'","x":"\xff\xfe"}',
            b'{"type":"nope","x":"\xff","y":"' + SECRET.encode() + b'"}',
            QUIT,
        ],
        shown=False,
    ),
    "control frames": Case(
        [
            b"{'llm_api_key': '" + SECRET.encode() + b"'}",
            update("llm_\\u0061pi_key", ESCAPED),
            control("v", subtype="violations"),
            control("s", subtype="snapshot"),
            control("k", subtype="snapshot", llm_api_key=SECRET),
            control("e", subtype="set_speed", speed=SECRET),
            control(SECRET, subtype="no-such-subtype"),
            QUIT,
        ],
        control=True,
    ),
    "config.yaml in HOME": Case(
        [b'{"type":"nope","note":"' + SECRET.encode() + b'"}', QUIT], config_yaml=True
    ),
    "the scenario's key": Case(
        [b"{'note': '" + ESCAPED.encode() + b"'", QUIT],
        scenario=True,
        expect_in_stderr=["diagnostic: the key is ***"],
    ),
}


@dataclass
class Run:
    """What one case left: every output stream and file, by name."""

    events: list[bytes] = field(default_factory=list)
    outputs: dict[str, bytes] = field(default_factory=dict)


def drive(argv: list[str], lines: list[bytes], env: dict[str, str], cwd: Path) -> Run:
    """Run ``argv``; read the first event, then send each line and read its one answer;
    then read to the end. Events apart, control frames and stderr kept."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    run = Run()
    frames: list[bytes] = []
    err = bytearray()
    pending = bytearray()
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "out")
    selector.register(proc.stderr, selectors.EVENT_READ, "err")
    deadline = time.monotonic() + DEADLINE
    seen = 0

    def read(until: int | None) -> None:
        nonlocal seen
        while until is None or seen < until:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer in time; stderr: {bytes(err)!r}"
            ready = selector.select(left)
            if not ready and until is None:
                continue
            for key, _ in ready:
                data = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not data:
                    selector.unregister(key.fileobj)
                    if not selector.get_map():
                        assert until is None, "the program ended before its answer"
                        return
                    continue
                if key.data == "err":
                    err.extend(data)
                    continue
                pending.extend(data)
                while b"\n" in pending:
                    end = pending.index(b"\n") + 1
                    line = bytes(pending[:end])
                    del pending[:end]
                    seen += 1
                    (frames if b'"type":"control_' in line else run.events).append(line)

    try:
        read(1)  # the first event
        for number, line in enumerate(lines, 2):
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()
            if line != QUIT:
                read(number)
        proc.stdin.close()
        read(None)
        assert proc.wait(timeout=DEADLINE) == 0, bytes(err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run.outputs = {"stdout's control frames": b"".join(frames), "stderr": bytes(err)}
    return run


def tool(*argv: str, env: dict[str, str], cwd: Path) -> dict[str, bytes]:
    done = subprocess.run(
        [*SIM, *argv], capture_output=True, env=env, cwd=cwd, timeout=DEADLINE, check=False
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the file holds the client's mistakes
    return {f"{argv[0]} stdout": done.stdout, f"{argv[0]} stderr": done.stderr}


def files_written(root: Path, ours: set[Path]) -> dict[str, bytes]:
    """Every file under ``root`` but ``ours``; a cassette's base64 lines decoded too."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and path not in ours:
            data = path.read_bytes()
            found[str(path.relative_to(root))] = data
            if path.suffix == ".json" and b'"line_b64"' in data:
                for entry in json.loads(data)["lines"]:
                    if "line_b64" in entry:
                        found[f"{path.name} line {entry['n']}"] = base64.b64decode(
                            entry["line_b64"]
                        )
    return found


@pytest.mark.parametrize("name", list(CASES))
def test_no_spelling_of_the_key_is_in_anything_the_simulator_writes(
    name: str, tmp_path: Path
) -> None:
    case = CASES[name]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    ours: set[Path] = set()
    program = [*SIM, "config", "--stdio", "--speed", "0", "--journal", str(work / "journal.jsonl")]
    if case.control:
        program += ["--control", "stdio"]
    if case.config_yaml:
        config = home / ".zread" / "config.yaml"
        config.parent.mkdir(mode=0o700)
        config.write_text(f"llm:\n  api_key: {SECRET}\n", encoding="utf-8")
        ours.add(config)
    if case.scenario:
        scenario = tmp_path / "keyed.toml"
        scenario.write_text(
            'extends = "default"\n\n[world.config]\n'
            f'llm_api_key = "{SECRET}"\n\n'
            '[[faults]]\nkind = "stderr"\nafter_event = 1\n'
            f'text = "diagnostic: the key is {SECRET}"\n',
            encoding="utf-8",
        )
        ours.add(scenario)
        program += ["--scenario", str(scenario)]
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env["HOME"] = str(home)
    cassette = work / "cassette.json"

    run = drive([*SIM, "record", "--out", str(cassette), "--", *program], case.lines, env, work)
    outputs = dict(run.outputs)
    outputs.update(tool("journal", str(work / "journal.jsonl"), env=env, cwd=work))
    outputs.update(tool("check", str(cassette), env=env, cwd=work))
    outputs.update(files_written(tmp_path, ours))

    # Not vacuous: every line reached the journal and the cassette, the report was made,
    # and zread's own events show the key where zread shows it.
    assert {"journal.jsonl", "cassette.json"} <= set(files_written(work, set()))
    journal = [json.loads(raw) for raw in (work / "journal.jsonl").read_bytes().splitlines()]
    sent = [record for record in journal if record["kind"] == "line"]
    assert len(sent) == sum(1 for line in case.lines if not line.startswith(b'{"type":"control_'))
    recorded = json.loads(cassette.read_bytes())["lines"]
    assert sum(1 for entry in recorded if entry["dir"] == "in") == len(case.lines)
    assert b"checked against the config chart" in outputs["stderr"]
    if case.shown:
        assert any(LEAK.search(event) for event in run.events), "the events show the key"
    for text in case.expect_in_stderr:
        assert text.encode() in outputs["stderr"]
    if case.control:
        assert outputs["stdout's control frames"].count(b'"control_response"') == 5

    leaked = sorted(where for where, data in outputs.items() if LEAK.search(data))
    assert leaked == [], {where: LEAK.findall(outputs[where])[:3] for where in leaked}


def test_a_socket_peer_is_answered_without_the_key(tmp_path: Path) -> None:
    folder = tempfile.mkdtemp(prefix="zss-")  # a socket's path must be short
    path = os.path.join(folder, "control.sock")
    journal = tmp_path / "journal.jsonl"
    frames = [
        control("v", subtype="violations"),
        control("s", subtype="snapshot"),
        control("k", subtype="snapshot", llm_api_key=SECRET),
        control("e", subtype="set_speed", speed=SECRET),
        control(SECRET, subtype="no-such-subtype"),
    ]
    received = bytearray()
    try:
        with Proc("config", "--control", f"unix:{path}", "--journal", str(journal)) as proc:
            shown = proc.read_raw()
            proc.write(b"{'llm_api_key': '" + SECRET.encode() + b"'}\n")
            proc.read_raw()
            proc.write(update("llm_\\u0061pi_key", ESCAPED) + b"\n")
            shown += proc.read_raw()
            peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            peer.settimeout(DEADLINE)
            peer.connect(path)
            peer.sendall(b"".join(frame + b"\n" for frame in frames))
            while received.count(b"\n") < len(frames):
                data = peer.recv(65536)
                assert data, "the socket closed before every answer"
                received.extend(data)
            peer.sendall(control("q", subtype="quit") + b"\n")
            assert proc.wait(DEADLINE) == 0
            peer.close()
            stderr = proc.stderr_so_far().encode()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert LEAK.search(shown), "zread's events show the key"
    assert b'"request_id":"***","error":"Unsupported control request subtype' in received
    assert b'"violations":[{' in received and b'got \\"***\\"' in received
    for where, data in {
        "socket": bytes(received),
        "journal": journal.read_bytes(),
        "stderr": stderr,
    }.items():
        assert not LEAK.search(data), (where, LEAK.findall(data)[:3])
