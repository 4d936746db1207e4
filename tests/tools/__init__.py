"""Helpers shared by the project's tests (unit, molecule verifiers, lab scripts)."""
