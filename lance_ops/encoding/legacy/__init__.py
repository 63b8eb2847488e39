"""Legacy Lance encodings, kept apart from the 2.1+ codec: 2.0 pages and 0.1 (v1) files.

Each version lives in its own subpackage and is chosen by the file reader from the footer's
version; nothing here is imported by the 2.1+ paths.
"""
