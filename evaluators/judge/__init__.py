"""The CoRE judge: the twelve factors scored by a language model (:mod:`.factor_judge`, :mod:`.llm_scorer`), the
conversation as the judge reads it (:mod:`.inputs`), the rubric (:mod:`.rubric`), the four-persona debate
(:mod:`.debate`) and iEvaLM's persuasiveness (:mod:`.persuasiveness`)."""
