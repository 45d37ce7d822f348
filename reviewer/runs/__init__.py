"""Emulator runs from the API to the engine: starting and steering runs, the fair order
of waiting runs, handing them to free worker slots, playing them in a worker, and sweeps."""
