"""Adapters that give other agent frameworks memledger's memory (each behind its own extra)."""
