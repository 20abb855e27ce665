"""Test-only helpers: reference implementations and Hypothesis strategies."""
