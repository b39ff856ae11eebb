"""The ``foreperson`` command line: a thin layer over the public API."""
