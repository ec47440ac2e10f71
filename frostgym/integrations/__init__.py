"""Adapters that plug frostgym envs into third-party training libraries."""
