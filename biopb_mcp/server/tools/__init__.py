"""The tools, one module per family: kernel, docs, viewer."""
