"""``python -m fleetlib``: the same command line as the ``fleetlib`` script."""

from fleetlib.cli import main

raise SystemExit(main())
