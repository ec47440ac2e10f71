"""Env families. Each family is a subpackage; ``registry.py`` binds ids to them."""
