"""seedvar: seed-variance studies for fine-tuned language models."""

__version__ = "0.1.0"
