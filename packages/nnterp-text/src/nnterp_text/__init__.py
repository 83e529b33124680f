"""nnterp-text: the text families whose modules differ from nnterp's default block.

Each family is a module in ``nnterp_text.families``, named as the model type it
was written for, and is found through the ``nnterp.families`` entry points:
nothing here needs importing by hand.
"""
