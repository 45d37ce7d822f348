"""``python -m emulator``: see ``emulator.cli``."""

from emulator.cli import main

raise SystemExit(main())
