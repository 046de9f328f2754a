"""Tests of the reference attention backends (a package so tests can share ``batches``)."""
