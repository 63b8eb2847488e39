"""Legacy Lance encodings: 2.0 pages (:mod:`.v2_0`) and 0.1 files, chosen by version in one place."""
