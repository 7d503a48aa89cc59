"""``python -m simulator.load ...``: the load test's command line, exiting with its code."""

from simulator.load.cli import main

raise SystemExit(main())
