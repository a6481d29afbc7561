"""Analyses of trained or freshly initialised models, each `(root, runs) -> markdown`:
probes at initialisation, head roles, accuracy by length and by depth."""
