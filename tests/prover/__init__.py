"""Tests of the prover layer's modules."""
