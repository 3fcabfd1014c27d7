"""The query side, one stage a module: parse, gates, retrieve (with match, the
verification), rank, passages, envelope, and the engine that runs them in
order; it never imports the indexer."""
