"""The command line: ``zread <command> [flags] --stdio`` and ``zread-sim``'s own commands.

One program, two names. Invoked as ``zread`` (``argv[0]``'s basename, or ``prog=``) it
is the drop-in: zread's commands, zread's help, errors naming ``zread``. Invoked under
any other name it is ``zread-sim``, which adds its own commands and lists the
simulator options in its help. Both accept the simulator options after a command.

- :mod:`~simulator.cli.program`: ``main``, the parsing of a command line, the exit
  codes, turning every expected failure into one line on stderr;
- :mod:`~simulator.cli.commands`: the table of ``zread-sim``'s own commands, each
  with its help beside what it does (zread's commands come from their modules);
- :mod:`~simulator.cli.options`: the simulator options and their variables;
- :mod:`~simulator.cli.session`: starting the process runner on a session.

The help of every command is in cobra's layout (:mod:`simulator.cobra`).
"""

from simulator.cli.program import ExitCode, main

__all__ = ["ExitCode", "main"]
