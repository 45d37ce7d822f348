"""``python -m emulator``: one module per subcommand (``run`` and ``presets`` in
``run``, ``numbers``, ``place``, ``trace-stats``, ``calibrate``); ``main`` builds the parser from ``REGISTER``."""

from emulator.cli.run import REGISTER, build_parser, main

__all__ = ["REGISTER", "build_parser", "main"]
