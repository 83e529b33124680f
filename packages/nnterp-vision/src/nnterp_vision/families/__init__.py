"""One module per vision-language family, each defining its ``FAMILY``; the package's catalog (``nnterp_vision.catalog``) indexes them."""
