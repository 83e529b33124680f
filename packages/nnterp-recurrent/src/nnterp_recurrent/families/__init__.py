"""One module per recurrent or hybrid family, each defining its ``FAMILY`` (a ``RecurrentFamily``); ``catalog.py`` indexes them."""
