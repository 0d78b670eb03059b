"""tallybook's benchmarks: ``python -m bench`` (see ``bench/__main__.py``).

Each measurement runs against its baseline in the same run, on the same
machine; results go to ``bench/results/latest.json`` and ``docs/benchmarks.md``.
Baselines live here only, never in the product.
"""
