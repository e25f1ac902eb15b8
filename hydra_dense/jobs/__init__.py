"""Jobs that drive other jobs, above the pieces they drive: the comparison
(:mod:`~hydra_dense.jobs.comparison`, its command :mod:`~hydra_dense.jobs.compare`), each seed's MSA
run converted and fine-tuned again (:mod:`~hydra_dense.jobs.from_msa`), a user's finished run made
fast (:mod:`~hydra_dense.jobs.from_run`) and the ``hydra-dense-convert`` command
(:mod:`~hydra_dense.jobs.convert`). Each starts its runs and conversions as ``python -m
hydra_dense.<module>`` processes."""
