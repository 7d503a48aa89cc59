"""zread's file formats: one encoder and one bounded decoder per format.

Owns the bytes of every file zread (and the simulator in its place) reads or writes,
and nothing about where they live or when they are written:

- :mod:`~simulator.formats.bounds`: the limits every decoder keeps (a size per file, a
  nesting depth, YAML aliases) and :class:`FormatError`;
- :mod:`~simulator.formats.gojson`: JSON as Go's ``encoding/json`` indents and escapes it;
- :mod:`~simulator.formats.ids`: version ids, slugs, Go's timestamps, plain names;
- :mod:`~simulator.formats.wiki`: ``wiki.json``, the ``current`` pointer, page files;
- :mod:`~simulator.formats.config`: ``config.yaml``, read bounded, saved round-trip
  (:mod:`~simulator.formats.config_edit`), with YAML as Go's yaml.v3 reads and writes it
  (:mod:`~simulator.formats.yamlv3`) and a three-way merge by lines
  (:mod:`~simulator.formats.linemerge`);
- :mod:`~simulator.formats.login`: ``login.json``;
- :mod:`~simulator.formats.log`: a line of ``log/zread.log``.

The store (:mod:`simulator.hosts.files`), browse, the scenarios and the tools all go
through these modules, so one format has one encoder.

Must not: do I/O, read the clock, or import anything above :mod:`simulator.core`.
"""

from __future__ import annotations

__all__: list[str] = []
"""Nothing is imported here: a command imports the formats it reads, when it reads
them (:class:`~simulator.formats.bounds.FormatError` is in ``bounds``)."""
