"""Serving: ``serve`` starts a transport (``stdio``, ``http``), ``exit`` is the one way out."""
