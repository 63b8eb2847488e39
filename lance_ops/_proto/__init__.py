"""Protobuf modules generated from protos/ (see scripts/gen_protos.py)."""
