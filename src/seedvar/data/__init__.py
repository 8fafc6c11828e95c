"""Data: loaders that bring MNLI and HANS from any supported source to one canonical schema."""
