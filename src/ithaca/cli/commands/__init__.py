"""One module per ``ithaca`` command: ``<name>.py`` defines ``ithaca <name>`` as ``command`` or
``group``."""
