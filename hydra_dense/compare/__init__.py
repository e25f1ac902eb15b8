"""The pieces of the comparison job (:mod:`hydra_dense.jobs.comparison`): recipe names, one worker
process per run and its reuse, the conversion cache, the speed phase, the report and its page, and
the path diagnostic of a finished run. The job itself, and the commands that drive it, are in
:mod:`hydra_dense.jobs`."""
