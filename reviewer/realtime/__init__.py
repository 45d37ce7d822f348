"""Live events: channel groups and publishing to them from synchronous code, presence,
the websocket consumers, their routes and the Origin check."""
