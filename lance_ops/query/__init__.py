"""Query concerns: filter predicates (SQL text or Arrow expressions) evaluated on Arrow tables.

Sits beside the table layer and below the fragment layer, which applies predicates while reading.
"""
