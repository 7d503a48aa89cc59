"""Tests of simulator/hosts/limits.py: a failure for want of descriptors, memory or
threads told from any other, and the one line that says so; the real ones are made in
a child process that has used up its descriptors."""

from __future__ import annotations

import errno
import os

import pytest

from simulator.errors import ConfigurationError, OutOfResources
from simulator.hosts.limits import doing, exhausted, out_of, reraise
from tests.e2e.helpers import run_starved


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.EMFILE, "Too many open files"),
        OSError(errno.ENFILE, "Too many open files in system"),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
        OSError(errno.ENOBUFS, "No buffer space available"),
        MemoryError(),
        RuntimeError("can't start new thread"),
    ],
)
def test_running_out_is_told_from_the_rest(error: BaseException) -> None:
    assert exhausted(error)
    with pytest.raises(type(error)):
        reraise(error)


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError(errno.ENOENT, "No such file or directory"),
        OSError(errno.ELOOP, "Too many levels of symbolic links"),
        PermissionError(errno.EACCES, "Permission denied"),
        RuntimeError("dictionary changed size during iteration"),
        ValueError("bad"),
    ],
)
def test_any_other_failure_is_an_answer_about_the_file(error: BaseException) -> None:
    assert not exhausted(error)
    reraise(error)  # returns: the caller reads it as it always did


def test_the_line_names_what_ran_out_what_was_being_done_and_the_limit() -> None:
    done = run_starved(
        "import errno\nfrom simulator.hosts.limits import out_of",
        "print(out_of(OSError(errno.EMFILE, 'x'), 'reading the wiki'))\n"
        "print(out_of(OSError(errno.ENFILE, 'x'), 'reading the wiki'))\n"
        "print(out_of(MemoryError(), 'saving the config'))\n"
        "print(out_of(OSError(errno.ENOMEM, 'x'), 'saving the config'))\n",
        spare=2,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "out of file descriptors while reading the wiki (ulimit -n is 256)"
    assert lines[1] == "the system is out of file descriptors while reading the wiki"
    assert lines[2].startswith("out of memory while saving the config")
    assert lines[3].startswith("out of memory while saving the config")


def test_out_of_threads_names_the_process_limit_when_there_is_one() -> None:
    line = str(out_of(RuntimeError("can't start new thread"), "answering a request"))
    assert line.startswith("out of threads while answering a request")


def test_it_is_the_users_setup_exit_2() -> None:
    error = out_of(OSError(errno.EMFILE, "x"), "reading the wiki")
    assert isinstance(error, OutOfResources)
    assert isinstance(error, ConfigurationError)
    assert error.exit_code == 2


def test_doing_turns_a_real_emfile_into_the_line() -> None:
    done = run_starved(
        "import os\nfrom simulator.hosts.limits import doing",
        "try:\n"
        "    with doing('opening the wiki'):\n"
        "        os.open(os.devnull, os.O_RDONLY)\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err, err.__cause__, err.__suppress_context__)\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "OutOfResources out of file descriptors while opening the wiki (ulimit -n is 256) "
        "None True\n"
    )


def test_doing_lets_any_other_failure_through(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(FileNotFoundError), doing("reading the wiki"):
        os.open(os.path.join(tmp_path, "missing"), os.O_RDONLY)
    with pytest.raises(RuntimeError, match="other"), doing("reading the wiki"):
        raise RuntimeError("other")
    inner = OutOfResources("out of file descriptors while writing a page")
    with pytest.raises(OutOfResources) as caught, doing("reading the wiki"):
        raise inner
    assert caught.value is inner  # the innermost work named stays named
