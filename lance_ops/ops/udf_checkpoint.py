"""Checkpoints of a batch UDF's results, so that an interrupted ``add_columns`` resumes.

``batch_udf(checkpoint_file=path)`` gives the UDF a SQLite file laid out as pylance's
``BatchUDFCheckpoint`` lays it out:

* ``batches(fragment_id INT, batch_index INT, result BLOB)``: the UDF's output for one batch of a
  fragment not finished yet (a pickled ``RecordBatch``);
* ``fragments(fragment_id INT, data BLOB)``: the new data file written for a finished fragment
  (its JSON); recording it drops that fragment's batches.

A rerun of the same ``add_columns`` on the same version reuses finished fragments' files (the
files are kept when the run fails) and cached batches, calling the UDF only for the rest. The
checkpoint file is removed once the ``Merge`` commits. Each call opens its own connection
(connections are not shared across threads).
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from contextlib import closing

import pyarrow as pa

from lance_ops.table.manifest import DataFile

__all__ = ["UDFCheckpoint"]


class UDFCheckpoint:
    """The SQLite checkpoint file of one batch UDF."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS batches (fragment_id INT, batch_index INT, result BLOB)")
            conn.execute("CREATE TABLE IF NOT EXISTS fragments (fragment_id INT, data BLOB)")
            conn.commit()

    def get_batch(self, fragment_id: int, batch_index: int) -> pa.RecordBatch | None:
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute(
                "SELECT result FROM batches WHERE fragment_id = ? AND batch_index = ?",
                (fragment_id, batch_index),
            ).fetchone()
        return None if row is None else pickle.loads(row[0])

    def insert_batch(self, fragment_id: int, batch_index: int, batch: pa.RecordBatch) -> None:
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute(
                "INSERT INTO batches (fragment_id, batch_index, result) VALUES (?, ?, ?)",
                (fragment_id, batch_index, pickle.dumps(batch)),
            )
            conn.commit()

    def get_fragment(self, fragment_id: int) -> DataFile | None:
        """The data file recorded for a finished fragment."""
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute("SELECT data FROM fragments WHERE fragment_id = ?", (fragment_id,)).fetchone()
        return None if row is None else DataFile.from_dict(json.loads(row[0]))

    def insert_fragment(self, fragment_id: int, data_file: DataFile) -> None:
        """Record a finished fragment's data file and drop its cached batches."""
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute(
                "INSERT INTO fragments (fragment_id, data) VALUES (?, ?)",
                (fragment_id, json.dumps(data_file.to_dict())),
            )
            conn.execute("DELETE FROM batches WHERE fragment_id = ?", (fragment_id,))
            conn.commit()

    def cleanup(self) -> None:
        """Remove the checkpoint file (after the commit that used it)."""
        os.remove(self.path)
