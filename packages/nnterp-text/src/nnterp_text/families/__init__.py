"""One module per text family: data (names, components) plus the small overrides where a forward differs."""
