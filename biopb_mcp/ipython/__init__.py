"""The IPython side: ``%load_ext biopb_mcp`` and the ``%biopb`` magics (``extension``)."""
