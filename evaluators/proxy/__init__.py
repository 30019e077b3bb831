"""The offline judge: what the proxy reads in a conversation (:mod:`.features`), each turn's scores
(:mod:`.turn_scores`), the scorer that turns them into CoRE factors and an overall (:mod:`.scorer`), and the fit
of its calibration to human labels (:mod:`.calibration`)."""
