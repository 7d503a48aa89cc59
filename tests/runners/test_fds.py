"""simulator.runners.fds: writing the process's streams on real pipes and files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from simulator.runners.fds import ProcessEndpoint, point_at_devnull, write_all, write_line


def test_write_all_writes_more_than_a_pipe_holds_at_once() -> None:
    read_end, write_end = os.pipe()
    data = os.urandom(1 << 20)
    chunks: list[bytes] = []

    def drain() -> None:
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    write_all(write_end, data)
    os.close(write_end)
    reader.join(5)
    os.close(read_end)
    assert b"".join(chunks) == data


def test_write_line_adds_the_newline_and_never_raises() -> None:
    read_end, write_end = os.pipe()
    write_line(write_end, "zread-sim: één")
    assert os.read(read_end, 100) == "zread-sim: één\n".encode()
    os.close(read_end)
    write_line(write_end, "nobody reads this")  # EPIPE: swallowed
    os.close(write_end)
    write_line(write_end, "closed fd")  # EBADF: swallowed


def test_point_at_devnull_ends_the_readers_stream(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    point_at_devnull(write_end)
    os.write(write_end, b"gone")  # goes to /dev/null
    os.close(write_end)
    assert os.read(read_end, 10) == b""
    os.close(read_end)


def test_the_endpoint_says_when_the_reader_went_away() -> None:
    read_end, write_end = os.pipe()
    endpoint = ProcessEndpoint(write_end, err_fd=write_end)
    assert endpoint.write(b"one\n") is True
    assert os.read(read_end, 10) == b"one\n"
    os.close(read_end)
    assert endpoint.write(b"two\n") is False
    assert endpoint.gone
    assert endpoint.write(b"three\n") is False  # not tried again
    os.close(write_end)


def test_the_endpoint_writes_stderr_lines_and_closes_its_output() -> None:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    endpoint = ProcessEndpoint(out_write, err_write)
    endpoint.stderr("a diagnostic")
    assert os.read(err_read, 100) == b"a diagnostic\n"
    endpoint.close_output()
    assert os.read(out_read, 10) == b""  # the reader sees the end
    assert endpoint.write(b"vanishes\n") is True  # into /dev/null, not an error
    for fd in (out_read, out_write, err_read, err_write):
        os.close(fd)
