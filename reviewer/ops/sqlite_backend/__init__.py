"""SQLite for a process serving many requests at once; see ``base``."""
