"""Glue: configuration, Redis, Ray actors, the self-play driver, the REST API, the dashboard and the CLI."""
