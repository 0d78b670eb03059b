"""Reliability: a Jepsen-bank-style workload, fault injection and an invariant checker.

``tallybook torture`` (cli/torture.py) runs it; the test suite runs a short form.
"""
