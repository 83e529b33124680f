"""One module per text family: data (names, components) plus the small overrides where a forward differs.

``SERVED`` is the table the ``nnterp.families`` entry point names: every model
type this package serves, and the family module serving it. A type whose
modules are the default block under the default names is served by
``nnterp.families.default`` itself.
"""

DEFAULT = "nnterp.families.default"

SERVED: dict[str, str] = {
    "gpt2": "nnterp_text.families.gpt2",
}
