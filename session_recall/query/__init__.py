"""The query side: parse, match (verification), retrieve; it never imports the indexer."""
