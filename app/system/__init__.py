"""Plumbing a person does not see: paths, logging, diagnostics, the library check, self-test, resources, background calls."""
