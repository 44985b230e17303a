"""Bridges out of msnb: what it reads, written in formats other tools open.

:mod:`tensorboard` converts MindSpore summaries, lineage and training logs into
TensorBoard event files (written by :mod:`tfevents`, msnb's own encoder);
:mod:`parquet` writes a Hive-partitioned Parquet dataset that DuckDB, Spark,
Dask and Polars read in parallel.  Neither is imported by ``import msnb``.
"""
