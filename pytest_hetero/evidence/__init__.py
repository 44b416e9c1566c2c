"""Evidence: the per-item model, the append-only journal, and the untested-scope computation."""
