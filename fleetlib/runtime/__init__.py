"""Rung 2: job timeline -> runtime goodput (measured) and its analytical model (equation 4)."""
