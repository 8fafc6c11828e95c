"""Pure statistics of a seeds table: variance bounds, noise, the verdict's rules."""
