"""A study's results from its finished seeds: tables, the verdict's evidence, past the paper."""
