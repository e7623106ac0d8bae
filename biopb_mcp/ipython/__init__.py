"""The IPython side: ``%load_ext biopb_mcp`` and the ``%biopb`` magics (``extension``), and the
agent's cells shown live in the kernel's own notebook (``live``, which finds that notebook's
collaborative room through ``jupyter_room``)."""
