"""``python -m simulator``: runs the command line and exits with its code."""

from simulator.cli import main

raise SystemExit(main())
