"""The biopb-mcp bench: ablation runs that measure whether the docs help an agent.

Run ``python -m bench --help`` from the repo root. ``prepare`` writes isolated config trees
(docs arm, or the ablated index), ``run`` drives an agent over the cases in both arms and writes
results.jsonl and summary.md, ``selftest`` proves every check can pass and can fail.
"""
