"""``predict`` on a user's files (``data.predict_files``): where the tasks write, on every rank."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from ..predict.outputs import PredictionOutputs
from .run_dir import RunDirMixin

__all__ = ["FilePredictions", "unused_predictions_folder"]

log = logging.getLogger(__name__)


def unused_predictions_folder(run_dir: Path) -> Path:
    """``<run_dir>/predictions``, or ``predictions_2``, ``_3``, ... when an earlier predict run (its
    logger off, so its folder is the same) left files there: two runs' outputs never mix."""
    n = 1
    while True:
        folder = run_dir / ("predictions" if n == 1 else f"predictions_{n}")
        if not folder.exists() or not any(folder.iterdir()):
            return folder
        n += 1


class FilePredictions(RunDirMixin):
    """Sets ``self.predictions`` (a :class:`PredictionOutputs` under ``<run dir>/predictions``)
    when the predict loader reads files, None when it reads a dataset split; at the end of the
    epoch the rows are gathered and rank 0 writes the table (:meth:`write_prediction_table`) and
    ``summary.json``."""

    predictions: Optional[PredictionOutputs] = None
    last_prediction_summary: Optional[dict] = None

    def _predict_dataset(self):
        loaders = self.trainer.predict_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        return getattr(loader, "dataset", None)

    def on_predict_epoch_start(self) -> None:
        self._resolve_run_dir()
        inputs = getattr(self._predict_dataset(), "inputs", None)
        if inputs is None:
            self.predictions = None
            return
        # rank 0 chooses, every rank writes there: a folder another rank already wrote into must not look taken
        folder = self.trainer.strategy.broadcast(unused_predictions_folder(self.run_dir), src=0)
        if folder.name != "predictions" and self.trainer.is_global_zero:
            log.warning("%s holds an earlier predict run's files: this run writes to %s", self.run_dir / "predictions",
                        folder)
        self.predictions = PredictionOutputs(folder, inputs)

    def on_predict_epoch_end(self) -> None:
        if self.predictions is not None:
            self.last_prediction_summary = self.predictions.finish(self.trainer.is_global_zero,
                                                                   self.write_prediction_table)

    def predict_files_guarded(self, batch: dict, predict_one) -> list:
        """``predict_one(image, index)`` for each file of a predict batch; a file whose prediction
        fails is named in the log, skipped and listed in ``summary.json``, and the rest go on.
        Returns the names of the files predicted."""
        names = []
        for unreadable in batch.get("unreadable", ()):
            self.predictions.fail(unreadable.index, unreadable.reason)
        for image, index in zip(batch["images"], batch["index"]):
            try:
                names.append(predict_one(image, int(index)))
            except (RuntimeError, ValueError) as err:  # this file's size or content, not the run's
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                self.predictions.fail(int(index), f"{type(err).__name__}: {first} (image {tuple(image.shape)})")
        return names

    def write_prediction_table(self, rows: list, folder: Path) -> Optional[Path]:
        """Write the gathered rows of the run (none by default); returns the file written."""
        return None
