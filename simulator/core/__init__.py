"""The sans-I/O core: a session running a compiled chart, and the bytes it speaks.

Owns: :mod:`~simulator.core.session` (lines and time in, events and effects out),
:mod:`~simulator.core.chart` (charts as data compiled to one ``transitions`` machine),
:mod:`~simulator.core.driver` (what a chart's model may ask of its session),
:mod:`~simulator.core.envelope` (the one place events become bytes),
:mod:`~simulator.core.lines` (a byte stream cut into command lines),
:mod:`~simulator.core.effects` (what a driver asks the outside world to do); the error
tree it raises is below it, in :mod:`simulator.errors`.

Must not: read, write, sleep or look at the clock, nor import from ``runners``,
``hosts``, ``tools`` or the command line.
"""
