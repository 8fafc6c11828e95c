"""A study: the seed job (one seed's folder and life), preparing inputs, evaluating, and after
the seeds: aggregate, analysis, verdict and report."""
