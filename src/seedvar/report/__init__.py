"""What a reader sees: the study's report, its figures and every sentence of the verdict."""
