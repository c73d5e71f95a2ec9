"""The ``leanloop`` command line."""
