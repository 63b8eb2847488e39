"""Index files written by pylance 14 and their maintenance: type detection (``types``), remapping
row addresses after compaction (``remap``) and extending an index over appended fragments
(``optimize``). Plain functions over a dataset's storage context and manifest; no ops imports."""
