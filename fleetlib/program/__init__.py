"""Rung 3: step traces -> program goodput; analytical FLOP, bandwidth and roofline relations."""
