"""The package version, kept in one place so the CLI, records and build agree."""

__version__ = "0.1.0"
