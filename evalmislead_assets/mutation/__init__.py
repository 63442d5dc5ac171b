"""Mutants of the fixed function and the mutation score of a test file."""
