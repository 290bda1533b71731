"""Benchmarks of streamwarden: query rewriting cost and secured runtime on Spark.

Run everything with ``python -m bench.run`` (``--quick`` for a smoke version); results
go to ``bench/results/``.
"""
