"""Evidence bundles after the run: manifest, in-toto statement, DSSE signing, verification, baseline
diff and shard merge. Pure library code: no pytest, no reporting."""
