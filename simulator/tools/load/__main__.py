"""``python -m simulator.tools.load ...``: the load test's command line, exiting with its code."""

from simulator.tools.load.cli import main

raise SystemExit(main())
