"""Data: any declared set, from any supported source, in one canonical schema."""
