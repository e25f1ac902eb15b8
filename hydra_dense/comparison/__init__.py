"""The comparison: MSA and Hydra recipes trained and evaluated side by side. Its command
(:mod:`~.command`, ``tools/compare.py``) parses the options (:mod:`~.options`, demo defaults in
:mod:`~.demo_defaults`); the job (:mod:`~.job`) trains one worker process per run (:mod:`~.worker`,
a :class:`~.request.RunRequest`; reuse and locks in :mod:`~.runs`), then times the recipes
(:mod:`~.speed`) and writes the report (:mod:`~.report`, :mod:`~.html`, :mod:`~.near_far`). Runs
that start from a converted or MSA-trained backbone come from :mod:`hydra_dense.conversion`
(``@converted``) and :mod:`~.from_msa`; a user's finished run is made fast by :mod:`~.from_run`
(``hydra-dense-convert --from-run``, whose command is :mod:`~.convert_command`); one GPU runs a
whole track with :mod:`~.gpu_track`; :mod:`~.path_diagnostic` mutes a finished run's paths."""
