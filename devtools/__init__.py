"""Development helpers shared by tests/ and bench/ (neither imports the other)."""
