"""One module per text family, each defining one ``FAMILY``: its model types, names, components and tiny checkpoints.

A sibling is a diff of its nearest relative (``roberta.FAMILY.replace(...)``);
a few modules hold only pieces their siblings share (``own_attention``,
``inline_mlp``, ``sinks``) or a base no model type is served by
(``post_ln_own_attention``, ``pre_ln_bert``). The types whose modules are the
default block under the default names are ``default_layout``'s. The registry
finds them through ``nnterp_text.catalog``, generated from these families by
``scripts/catalogs.py``.
"""
