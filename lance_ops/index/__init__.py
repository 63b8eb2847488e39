"""Index files written by pylance 14 and their maintenance, as plain functions over a dataset's
storage context and manifest (no ops or dataset imports).

``types`` names an index's type as pylance does; ``remap`` rewrites an index after compaction moved
its rows (``mapping.RowAddressMapping``); ``optimize`` extends an index over appended fragments.
One module per index layout (``btree``, ``bitmap`` with LABEL_LIST and NGRAM, ``zonemap``,
``inverted``, ``ivf`` with ``ivf_pb`` and ``hnsw``), each opening with its file layout; ``files``
reads an index's Lance files and writes a new index directory; ``treemap`` codes row-address sets.
"""
