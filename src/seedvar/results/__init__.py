"""A study's results from its finished seeds: the seeds table, the evidence the verdict
weighs, and what goes past the paper."""
