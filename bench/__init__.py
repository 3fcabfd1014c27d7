"""The instruments that measure session-recall: the side-by-side benchmark
(`python -m bench.run`), its corpus generator (`bench.corpus`), the probes on a
kept bench index (`bench.query_profile`, `bench.query_ab`, `bench.confined`),
the cost probes (`bench.wipe_cost`, `bench.hostile_cost`, `bench.redaction_fp`,
`bench.fixture_latency`) and the recall-quality harness (`bench.quality`).

Each is run as a module from the project's root, so that `bench` and the
project are importable without any path set-up; their shared helpers are in
`bench.common`.
"""
