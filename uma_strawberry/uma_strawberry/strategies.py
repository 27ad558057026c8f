"""Custom operator strategies: (op name, strategy function, priority level) triples.

Strawberry needs none: UMA lowers an offloaded function with TVM's own compute
(``te.create_prim_func``), and the TIR pass replaces it by DMA transfers and engine calls.
"""
STRATEGIES = []
