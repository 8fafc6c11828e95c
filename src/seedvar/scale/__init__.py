"""Scaling a study out: many seeds on many machines."""
