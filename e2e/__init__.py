"""End-to-end tests of allocwatch on a real cluster (run with `pytest e2e --provider=...`)."""
