"""Adapters that give other agent frameworks memtape's memory (each behind its own extra)."""
