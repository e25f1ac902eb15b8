"""The main job: train and evaluate MSA, Hydra, hybrid, local-mixing and converted backbones the same
way, over several seeds, side by side.

    python tools/compare.py                                   # embedded demo (segmentation)
    python tools/compare.py --plans msa,hydra,hydra+dwc3,hydra+dwc3@converted --seeds 0,1,2
    python tools/compare.py --config configs/segmentation/ade20k_upernet_vit_b16.yaml \\
        --plans msa,hydra,hybrid2 --data.init_args.root=/data/ADEChallengeData2016
    python tools/compare.py --list-plans                      # every accepted plan name

Every recipe gets the same config, data and schedule; only the backbone's attention plan changes
(``--plans``; ``+dwc3`` adds local mixing, ``@converted`` converts the MSA weights first: the
pretrained ones, or for a task trained from scratch the comparison's own ``msa`` run; ``@aligned``
adds whole-network alignment to the MSA features after that conversion; ``@distilled`` fine-tunes
that conversion with the MSA weights' backbone features as an extra loss;
``@from_msa`` converts the comparison's fine-tuned ``msa`` run of each seed and fine-tunes again,
``msa@continued`` fine-tunes that run again without conversion; ``+mean`` averages Hydra's ``kv``
over tokens; ``--eval-sizes 224,448`` validates every run again at those sizes) or the backbone file
(``--backbones a.yaml,b.yaml``). Each (recipe, seed) trains in a fresh process, so its
peak memory is its own; finished runs are reused when the same command is run again. Extra
``--key=value`` arguments are LightningCLI overrides. Outputs in ``--out``: ``table.md`` /
``table.csv`` (mean ± std over seeds), ``runs.csv`` (every seed), ``per_class.md``,
``accuracy_vs_speed.png`` (Pareto front with error bars), ``summary.json``, and each run's folder.
"""
from .cli import (DEFAULT_PLANS, DEMO_CONFIG, DEMO_PLANS, DETECTION_CONVERT_CONFIG, DETECTION_DEMO_CONFIG,
                  VIDEO_DEMO_CONFIG, VIDEO_DEMO_PLANS, entry, main, parse_args)
from .job import ComparisonJob, run_comparison

__all__ = ["main", "entry", "run_comparison", "parse_args", "ComparisonJob", "DEMO_CONFIG", "DEFAULT_PLANS", "DEMO_PLANS",
           "VIDEO_DEMO_CONFIG", "VIDEO_DEMO_PLANS", "DETECTION_DEMO_CONFIG", "DETECTION_CONVERT_CONFIG"]
