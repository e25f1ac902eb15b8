"""LightningCLI entry point: ``hydra-dense-train {fit,validate,test,predict} --config ...``.

Any LightningModule / LightningDataModule is chosen by ``class_path`` in YAML (the tasks in
:mod:`hydra_dense.tasks`, the data modules in :mod:`hydra_dense.data`); the backbone is a
separate YAML file swapped with ``--model.init_args.backbone=configs/backbones/<name>.yaml``.

On top of Lightning's CLI, every run gets (see :mod:`hydra_dense.runtime`):

- ``last.ckpt`` every ``--checkpoint_every_minutes`` (default 1) or ``--checkpoint_every_n_steps``,
  and at the end, written atomically;
- ``--ckpt_path last``: the newest ``last*.ckpt`` / SLURM ``hpc_ckpt_*.ckpt`` anywhere under
  ``trainer.default_root_dir`` (no checkpoint yet: starts fresh, so one command serves the first
  submission and every requeue); resumes model, optimizer, schedule, loop counters, the position in
  the epoch and the RNG state;
- a checkpoint path that does not exist, cannot be read, or does not fit the model (its weights, its
  task class, its attention plan) fails before anything runs; the config and command line decide
  every setting (Lightning's loading of the checkpoint's saved settings over them is turned off) and
  the log lists those that differ from the checkpoint's;
- ``--nonfinite.action stop|skip``: a NaN / inf loss stops the run naming the step, or skips it;
- under SLURM, the requeue signal saves ``hpc_ckpt_N.ckpt`` at the next step boundary on all ranks;
- what the data readers clipped, dropped or skipped, printed once and kept in ``data_report.json``;
- TensorBoard logs and ``metrics.csv`` in one ``lightning_logs/version_N`` folder (unless the
  config names its own ``trainer.logger``), and ``curves.png`` there after every validation.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence, Union

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities import rank_zero_info
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.utilities.exceptions import SIGTERMException

from .backbones.config_files import BackboneFileError, backbone_files_in_args, check_backbone_file, check_inline_plans
from .checkpoints import (AtomicCheckpointIO, ModelIdentityCheckpoint, PeriodicLastCheckpoint, RNGStateCheckpoint,
                          check_checkpoint_matches, find_resume_checkpoint, remove_stale_temporaries)
from .runtime import DataReport, NonFiniteLossGuard, StepBoundaryRequeue, TrainingCurves
from .runtime.config_check import ConfigFileError, check_config_file, config_files_in_args, setting_source
from .checkpoints.identity import settings_differing
from .runtime.progress import silence_known_noise
from .runtime.refusal import KNOWN_REFUSALS, plain_refusals
from .checkpoints.resume import read_saved_settings

SPECIAL_CKPT = ("best", "hpc", "registry")
# what a run writes into its log folder before training starts (nothing a person would want kept)
_LOG_ONLY = ("hparams.yaml", "metrics.csv", "config.yaml")
_PROCESS_START = time.time()


class _PlainErrorParser(LightningArgumentParser):
    """A refused value is one line naming the config file that set it (``<file>: trainer.max_steps:
    Expected a <class 'int'>. Got value: four``), under a one-line usage instead of every option
    (``--help`` still lists them)."""

    argv: tuple[str, ...] = ()

    def format_usage(self) -> str:
        return f"usage: {self.prog} [options]\n"

    def error(self, message: str, ex: Optional[Exception] = None):
        super().error(_plain_parse_error(message, self.argv), ex)


def _plain_parse_error(message: str, argv: Sequence[str]) -> str:
    """jsonargparse's ``Parser key "model": Does not validate against any of the Union subtypes ...
    Problem with given class_path '...': lr: Expected ...`` as ``<where>: model.init_args.lr:
    Expected ...``, where ``<where>`` is the config file or the ``--option`` that gave the value."""
    match = re.match(r'Parser key "([\w.]+)":\s*(.*)', message, re.S)
    if not match:
        return message
    key, problem = match.group(1), " ".join(match.group(2).split())
    inner = re.search(r"Problem with given class_path '[\w.]+': ([\w.]+): (.*?)(?: - Expected a <class 'NoneType'>|$)",
                      problem)
    unknown = re.search(r"Problem with given class_path '([\w.]+)': Option '(\w+)' is not accepted", problem)
    if inner:
        key, problem = f"{key}.init_args.{inner.group(1)}", inner.group(2)
    elif unknown:
        key, problem = f"{key}.init_args.{unknown.group(2)}", f"{unknown.group(1)} takes no option {unknown.group(2)!r}"
    where = setting_source(argv, key)
    named = f"--{key}" if where == f"--{key}" else f"{where}: {key}" if where else key
    return f"{named}: {problem}"


class HydraDenseCLI(LightningCLI):
    """LightningCLI with subclass mode for model and data (no home-made registry), periodic atomic
    checkpoints, ``--ckpt_path last`` across runs, early checkpoint checks and the NaN guard."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(NonFiniteLossGuard, "nonfinite")
        parser.add_argument("--checkpoint_every_minutes", type=Optional[float], default=1.0,
                            help="write last.ckpt this often during training (wall clock, decided on rank 0)")
        parser.add_argument("--checkpoint_every_n_steps", type=Optional[int], default=None,
                            help="write last.ckpt every N optimizer steps instead (reproducible positions)")
        parser.add_argument("--allow_untrained", type=bool, default=False,
                            help="validate / test / predict without --ckpt_path: the config's own weights (random, or "
                                 "a pretrained backbone under an untrained head)")

    def instantiate_classes(self) -> None:
        """Build model, data and trainer; an error in a constructor (a missing data folder, a bad
        option value) exits with that error alone instead of jsonargparse's union-type dump."""
        try:
            super().instantiate_classes()
        except (ValueError, FileNotFoundError, TypeError) as err:
            noise = ("Expected a <class 'NoneType'>", "Given value", "Subtypes:", "Errors:",
                     "Does not validate against any of the Union subtypes")
            lines = [ln.strip().removeprefix("- ") for ln in str(err).splitlines()
                     if ln.strip() and not any(n in ln for n in noise)]
            self.parser.error("\n  ".join(lines) if lines else str(err))

    def parse_arguments(self, parser, args) -> None:
        """Backbone YAML files are checked first: an error inside a nested backbone file would
        otherwise surface as jsonargparse's "Config file loop detected", naming nothing useful."""
        argv = list(args) if isinstance(args, (list, tuple)) else (sys.argv[1:] if args is None else [])
        for each in [parser, *getattr(self, "_subcommand_parsers", {}).values()]:
            each.argv = tuple(argv)
        for path in config_files_in_args(argv):
            try:
                check_config_file(path)
            except ConfigFileError as err:
                parser.error(str(err))
        try:
            for path in backbone_files_in_args(argv):
                check_backbone_file(path)
            check_inline_plans(argv)
        except BackboneFileError as err:
            parser.error(str(err))
        super().parse_arguments(parser, args)

    def _parse_ckpt_path(self) -> None:
        """Lightning would load the checkpoint's saved settings over the config here, task class
        included. Instead the config and command line decide every setting (the checkpoint gives the
        weights and, for ``fit``, the optimizer, schedule and loop state); the settings that differ
        from the checkpoint's are listed in the log, and the checkpoint's task class and attention
        plan are checked against the built model before anything runs (``_resolve_ckpt_path``)."""
        self._settings_note = None
        subcommand = self.config.get("subcommand")
        if not subcommand:
            return
        path = self.config[subcommand].get("ckpt_path")
        if not path or path in SPECIAL_CKPT or path == "last":
            return
        saved = read_saved_settings(path)
        model = self.config[subcommand].get("model")
        configured = model.get("init_args") if model is not None else None
        configured = configured.as_dict() if hasattr(configured, "as_dict") else dict(configured or {})
        differing = settings_differing(saved, configured)
        self._settings_note = (f"[checkpoint] {path}: weights{' and training state' if subcommand == 'fit' else ''} "
                               f"from the checkpoint, every setting from the config and command line" +
                               (f"; differing from the checkpoint's: {'; '.join(differing)}" if differing else ""))

    def _option(self, key: str, default: Any = None) -> Any:
        """A parsed, instantiated option of this run (under its subcommand when there is one)."""
        cfg = self.config_init
        return cfg.get(str(self.subcommand), cfg).get(key, default)

    def instantiate_trainer(self, **kwargs: Any) -> L.Trainer:
        """The trainer, with this toolkit's callbacks after the config's own and the atomic
        checkpoint writer unless the config names a checkpoint plugin."""
        trainer_cfg = self._option("trainer", {})
        callbacks = trainer_cfg.get("callbacks") or []
        callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
        callbacks += [RNGStateCheckpoint(), ModelIdentityCheckpoint(), StepBoundaryRequeue(), DataReport(),
                      TrainingCurves()]
        every_steps, every_min = self._option("checkpoint_every_n_steps"), self._option("checkpoint_every_minutes")
        if trainer_cfg.get("enable_checkpointing", True) is not False and (every_steps or every_min):
            callbacks.append(PeriodicLastCheckpoint(
                every_n_train_steps=every_steps or None,
                train_time_interval=None if every_steps else timedelta(minutes=every_min)))
        if trainer_cfg.get("logger") in (None, True) and "logger" not in kwargs:  # Lightning's default: None = True
            kwargs["logger"] = default_loggers(trainer_cfg.get("default_root_dir") or os.getcwd())
        plugins = trainer_cfg.get("plugins") or []
        plugins = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
        if not any(hasattr(p, "save_checkpoint") for p in plugins):
            plugins.append(AtomicCheckpointIO())
        try:
            return super().instantiate_trainer(**{"callbacks": callbacks, "plugins": plugins, **kwargs})
        except MisconfigurationException as err:  # e.g. accelerator=gpu on a machine without one
            for logger in kwargs.get("logger") or []:
                _remove_if_empty(Path(logger.log_dir), Path(trainer_cfg.get("default_root_dir") or os.getcwd()))
            raise ValueError(f"trainer: {err} (accelerator={trainer_cfg.get('accelerator')!r}, "
                             f"devices={trainer_cfg.get('devices')!r}; this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s))") from None

    def _resolve_ckpt_path(self, subcommand: str) -> None:
        """``last`` -> the newest resumable checkpoint under the run's root; any path -> checked now."""
        cfg = self.config_init[subcommand]
        path = cfg.get("ckpt_path")
        if path is None and subcommand != "fit" and not self._option("allow_untrained"):
            raise ValueError(f"{subcommand}: no --ckpt_path, so the model would have the config's untrained weights; "
                             f"give the trained checkpoint (--ckpt_path <file> or last), or --allow_untrained=true to "
                             f"{subcommand} those weights anyway")
        if path is None or path in SPECIAL_CKPT:
            return
        if path == "last":
            removed = remove_stale_temporaries(self.trainer.default_root_dir)
            if removed:
                rank_zero_info(f"[resume] removed {removed} half-written checkpoint(s) of the interrupted run")
            found = find_resume_checkpoint(self.trainer.default_root_dir)
            if found is None:
                rank_zero_info(f"[resume] no last*.ckpt / hpc_ckpt_*.ckpt under {self.trainer.default_root_dir}: "
                               "starting from scratch")
                cfg["ckpt_path"] = None
                return
            rank_zero_info(f"[resume] resuming from {found}")
            path = cfg["ckpt_path"] = str(found)
        check_checkpoint_matches(self.model, path, resumes_training=subcommand == "fit")
        if getattr(self, "_settings_note", None):
            rank_zero_info(self._settings_note)

    def _run_subcommand(self, subcommand: str) -> None:
        try:
            super()._run_subcommand(subcommand)
        except KNOWN_REFUSALS:
            self._remove_refused_log_folder()
            raise

    def _remove_refused_log_folder(self) -> None:
        """A run refused before training starts (a data check, a checkpoint that does not fit) leaves no
        log folder: Lightning's loggers make theirs before the data module's checks run. Only a folder
        whose every file this process wrote, and none a result (checkpoints, overlays), is removed."""
        trainer = getattr(self, "trainer", None)
        if trainer is None or trainer.global_step > 0 or not trainer.is_global_zero:
            return
        started = _PROCESS_START - 1.0
        for folder in {Path(lg.log_dir) for lg in trainer.loggers if getattr(lg, "log_dir", None)}:
            files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
            if folder.is_dir() and all(p.stat().st_mtime >= started and (p.name.startswith("events.out.tfevents.")
                                                                       or p.name in _LOG_ONLY) for p in files):
                shutil.rmtree(folder, ignore_errors=True)
                root = Path(trainer.default_root_dir).resolve()
                for parent in folder.resolve().parents:  # the folders made for it, now empty
                    if not parent.is_relative_to(root) or any(parent.iterdir()) or parent.stat().st_ctime < started:
                        break
                    parent.rmdir()
                    if parent == root:
                        break

    # LightningCLI calls before_<subcommand> ahead of the trainer method, before it reads ckpt_path
    def before_fit(self) -> None:
        self._resolve_ckpt_path(self.subcommand)

    before_validate = before_test = before_fit

    def before_predict(self) -> None:
        self._resolve_ckpt_path("predict")
        hparams = getattr(self.datamodule, "hparams", {})
        if "predict_files" in hparams and not hparams["predict_files"]:
            # from the command line a split's predictions would be computed and dropped: exit 0, nothing kept
            raise ValueError("predict writes files only for the images or videos you name: give "
                             "--data.init_args.predict_files=<folder, glob or file> (validate scores the split)")


def _remove_if_empty(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents below ``root`` while they are empty (a run refused before it
    wrote anything); ``root``, the user's, stays."""
    for path in [folder, *folder.parents]:
        if (path.resolve() == root.resolve() or not path.resolve().is_relative_to(root.resolve())
                or not path.is_dir() or any(path.iterdir())):
            return
        path.rmdir()


def default_loggers(root_dir: str) -> list:
    """TensorBoard (curves, overlays) and the CSV file (``metrics.csv``, what tools and
    ``curves.png`` read), both in ``<root_dir>/lightning_logs/version_N``; CSV alone without tensorboard."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    try:
        tensorboard = TensorBoardLogger(save_dir=root_dir, name="lightning_logs")
    except ModuleNotFoundError:
        return [CSVLogger(save_dir=root_dir, name="lightning_logs")]
    csv = CSVLogger(save_dir=root_dir, name="lightning_logs", version=tensorboard.version)
    csv.experiment  # noqa: B018 - its writer takes the shared folder now, while it is empty (no "not empty" warning)
    return [tensorboard, csv]


class _ParseOnlyCLI(HydraDenseCLI):
    def instantiate_classes(self) -> None:  # the config only: nothing is built
        pass


def parse_config(args: list[str]):
    """The resolved config (a jsonargparse Namespace) of ``args`` without building model, data or
    trainer: what a run with these arguments would use."""
    return main(args, run=False, cli_class=_ParseOnlyCLI).config


def main(args: Optional[list[str]] = None, run: bool = True,
         cli_class: type[HydraDenseCLI] = HydraDenseCLI, callbacks: Sequence[L.Callback] = ()) -> HydraDenseCLI:
    """The hydra_dense command line on ``args``; ``callbacks`` join the trainer's (after the config's)."""
    silence_known_noise()
    cli = cli_class(
        model_class=L.LightningModule,
        datamodule_class=L.LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
        run=run,
        auto_configure_optimizers=False,
        trainer_defaults={"callbacks": list(callbacks)} if callbacks else None,
        parser_class=_PlainErrorParser,
    )
    if run:
        _close_process_group()
    return cli


class BuiltTask(NamedTuple):
    """What a task config declares, built: the model, its data module and the trainer."""

    model: L.LightningModule
    datamodule: L.LightningDataModule
    trainer: L.Trainer


def build_task(config: Union[str, Path], overrides: Sequence[str] = (), root_dir: Optional[Path] = None) -> BuiltTask:
    """The model, data module and trainer of a task ``config`` (LightningCLI ``overrides`` such as
    ``--trainer.max_steps=10`` applied; ``root_dir``: the trainer's ``default_root_dir``), built as
    ``tools/train.py`` builds them, nothing run. The library's one way to build a task from a config."""
    args = ["--config", str(config), *overrides] + ([f"--trainer.default_root_dir={root_dir}"] if root_dir else [])
    cli = main(args, run=False)
    return BuiltTask(cli.model, cli.datamodule, cli.trainer)


# a run stopped by SIGTERM exits as a killed process would (128 + 15), so a scheduler never reads it as done
SIGTERM_EXIT = 143


def _entry(argv: list[str]) -> int:
    """``hydra-dense-train`` / ``tools/train.py``: :func:`main`, refusing plainly
    (:mod:`hydra_dense.runtime.refusal`); exit status 143 after a SIGTERM stopped it (Lightning's
    ``SIGTERMException`` is a ``SystemExit`` without a code, which would read as success)."""
    try:
        main(argv)
    except SIGTERMException:
        print("[stopped] SIGTERM received: the run stopped before its end (its last.ckpt is kept; go on with "
              "--ckpt_path last)", file=sys.stderr, flush=True)
        return SIGTERM_EXIT
    return 0


entry = plain_refusals(_entry, on_interrupt="a fit's last.ckpt is kept: go on with --ckpt_path last")


def _close_process_group() -> None:
    """Close the process group a finished run leaves open (under torchrun Lightning does not own
    it): left to interpreter teardown, gloo's threads have aborted a finished rank (SIGABRT,
    "terminate called without an active exception") and failed the whole job."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(entry())
