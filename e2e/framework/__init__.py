"""Cluster-agnostic helpers for the end-to-end tests."""
