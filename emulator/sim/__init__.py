"""The simulation: the event queue (``events``), the engine that runs it (``engine``),
arrivals and the request store, the per-model dispatcher, dispatch policies (one
module each under ``policies``), worker models (``workers``), the fleet's arrays, and
what a run reports (``results``)."""
