"""The settings: every config key declared once (``settings``), with where each was written (``toml_lines``)."""
