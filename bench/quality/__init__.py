"""Recall quality on labelled data: the harness (`python -m bench.quality.evaluate`),
its data sets (`datasets`), the baselines it compares against (`baselines`)
and the ablation of ranking features (`python -m bench.quality.ablate`)."""
