"""KBRD, BARCOR and UniCRS: model code that loads the published iEvaLM / CRS Arena checkpoints.

Layout of a checkpoint set (the published one, and ours):
``<root>/{kbrd,barcor,unicrs}_{rec,conv}_<dataset>/`` — see :mod:`crs_backends.neural.checkpoints`.
The knowledge graph in the iEvaLM layout comes from :mod:`crs_backends.neural.kg_reader`.
"""
