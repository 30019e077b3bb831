"""Meta-evaluation: how far automatic scores agree with people (:mod:`.correlation`: Spearman, vote agreement,
the label readers) and the proxy's validity report (:mod:`.validity`)."""
