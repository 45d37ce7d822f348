"""The browser's views: pages, the figures they read, the token page and /healthz."""
