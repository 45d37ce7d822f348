"""The app's models, one module per area; re-exported here for Django."""
