"""Report writers: every rendering is generated from evidence.json, never from terminal text."""
