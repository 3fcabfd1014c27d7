"""The indexer: read session logs from sources, project each message to its
searchable text, redact, and mirror into the index incrementally.

sources/  one parser per kind of log (canonical, claude_code, codex)
files     discovery and byte-exact incremental reading of plain and .zst files
project   what is searchable per role (§2.2)
ingest    the writer: applies a batch of events in one transaction
sync      one incremental pass over a set of paths
watch     the long-lived watcher
"""
