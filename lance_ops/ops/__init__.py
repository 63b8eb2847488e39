"""Operations on a dataset, one module each, above the fragment layer.

Each is a plain function of ``(dataset, arguments)`` that writes what it needs through
:mod:`lance_ops.fragment`, builds one operation of :mod:`lance_ops.table.transaction` and commits it
with :func:`lance_ops.ops.commit.commit`, returning the manifest written. ``LanceDataset``, the Spark
jobs and the Dagster assets all call these functions.

* :mod:`.commit` — committing an operation or transaction (``LanceDataset.commit``);
* :mod:`.write` — writing data as a new dataset, an append or an overwrite (``write_dataset``);
* :mod:`.delete` — deleting the rows a predicate selects (``LanceDataset.delete``);
* :mod:`.statistics` — rebuilding column statistics (``ds.stats.rebuild``);
* :mod:`.encodings` — profiling data into a dataset encoding plan (HLL sketches) and storing it.
"""
