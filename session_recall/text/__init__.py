"""Text shared by the indexer and the query side: folding, tokens, redaction.

Both sides must fold and tokenize identically, or the index stops being a
superset of the true matches; that is why this lives in one place.
"""
