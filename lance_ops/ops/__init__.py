"""Operations on a dataset, one module each, above the fragment layer.

Each is a plain function of ``(dataset, arguments)`` that writes what it needs through
:mod:`lance_ops.fragment`, builds one operation of :mod:`lance_ops.table.transaction` and commits it
with :func:`lance_ops.ops.commit.commit`, returning the manifest written. ``LanceDataset``, the Spark
jobs and the Dagster assets all call these functions.

* :mod:`.commit` — committing an operation or transaction (``LanceDataset.commit``);
* :mod:`.write` — writing data as a new dataset, an append or an overwrite (``write_dataset``);
* :mod:`.delete` — deleting the rows a predicate selects (``LanceDataset.delete``);
* :mod:`.columns` — adding, dropping and altering columns (``add_columns``, ``drop_columns``,
  ``alter_columns``);
* :mod:`.compaction` — compaction as plan / tasks / commit (``lance_ops.optimize``, ``ds.optimize``);
* :mod:`.tags` — tags (``LanceDataset.tags``);
* :mod:`.history` — ``versions()``, ``history()`` and ``restore()``;
* :mod:`.cleanup` — removing old versions and unreferenced files (``cleanup_old_versions``);
* :mod:`.statistics` — rebuilding column statistics (``ds.stats.rebuild``);
* :mod:`.encodings` — profiling data into a dataset encoding plan (HLL sketches) and storing it.
"""
