"""Helpers shared by the tests: tiny data, tiny runs, crash callbacks."""
