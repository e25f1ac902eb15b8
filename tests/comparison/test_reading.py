"""The sentences under a comparison table, on rows whose reading is worked out by hand."""
import pytest

from hydra_dense.comparison.reading import read_table


def _row(plan: str, scores: list[float], std: float, speedup_big: float, attention: str = "", **more) -> dict:
    return dict(plan=plan, attention=attention or f"{plan} x12", seeds=",".join(str(i) for i in range(len(scores))),
                score=sum(scores) / len(scores), score_std=std, speedup_big=speedup_big, **more)


def test_a_locally_decided_task_recommends_the_fastest_plan_level_with_msa_and_says_no_term_can_show_its_worth():
    rows = [_row("msa", [50.0, 50.5, 49.5], 0.5, 1.0),
            _row("hydra+mean+dwc7@converted", [49.8] * 3, 0.3, 2.14, global_cost=0.1, global_cost_std=0.05),
            _row("local+dwc7@converted", [49.6] * 3, 0.4, 2.20, attention="local+dwc7 x12"),
            _row("hydra", [20.0] * 3, 1.0, 2.30)]
    assert read_table(rows, "448x448", "1024x1024") == [
        "Fastest plan within 1.0 points of MSA: `local+dwc7@converted`, 49.6 against MSA's 50.0 (3 seeds, std up "
        "to 0.5), 2.20x MSA's speed at 1024x1024.",
        "The task is decided locally: MSA 50.0 against 49.6 for `local+dwc7@converted`, which has no global path "
        "(3 seeds, std up to 0.5); no global term can show its worth here.",
        "The backbone's global term, zeroed at evaluation, costs nothing that counts (under 1.0 points or twice its "
        "seed spread) in any plan."]


def test_a_task_that_needs_the_scene_names_the_gap_to_the_plan_with_no_global_path_and_what_carries_it():
    rows = [_row("msa", [93.0] * 3, 0.3, 1.0, score_far=92.0),
            _row("vitdet8_msa", [92.5] * 3, 0.4, 1.66, attention="window x8, msa@[2, 5, 8, 11]",
                 global_cost=45.0, global_cost_std=1.0),
            _row("vitdet8_windows", [44.0] * 3, 0.3, 2.79, attention="window x12", score_far=35.0,
                 head_pool_cost=0.2, head_pool_cost_std=0.1)]
    assert read_table(rows, "", "1024x1024") == [
        "Fastest plan within 1.0 points of MSA: `vitdet8_msa`, 92.5 against MSA's 93.0 (3 seeds, std up to 0.4), "
        "1.66x MSA's speed at 1024x1024.",
        "The task needs global mixing: MSA 93.0 against 44.0 for `vitdet8_windows`, which has no global path; far "
        "from the cue 92.0 against 35.0 (3 seeds, 49.0 apart, more than twice the spread 0.3).",
        "The backbone's global term, zeroed at evaluation, costs 45.0 ± 1.0 in `vitdet8_msa`.",
        "The head's global pooling bin, zeroed at evaluation, costs nothing that counts (under 1.0 points or twice "
        "its seed spread) in any plan."]


def test_one_seed_says_no_spread_was_measured_and_speed_is_read_against_msa_wherever_it_is_listed():
    rows = [_row("hydra", [18.0], 0.0, 1.0), _row("msa", [49.3], 0.0, 0.5),
            _row("local+dwc7@converted", [30.0], 0.0, 1.1, attention="local+dwc7 x12",
                 head_pool_cost=12.0, head_pool_cost_std=0.0)]
    assert read_table(rows) == [
        "No plan keeps MSA's accuracy: the closest, `local+dwc7@converted`, scores 30.0 against MSA's 49.3 (1 seed: "
        "no spread measured; 2.20x MSA's speed).",
        "Global mixing: MSA 49.3 against 30.0 for `local+dwc7@converted`, which has no global path; 19.3 apart in "
        "1 seed (3 seeds tell whether that is beyond the seed-to-seed spread).",
        "The head's global pooling bin, zeroed at evaluation, costs 12.0 (1 seed) in `local+dwc7@converted`."]


def test_seeds_that_spread_widely_widen_what_counts_as_level_and_say_so():
    rows = [_row("msa", [100.0, 61.3, 96.2], 21.4, 1.0), _row("hydra@converted", [92.1] * 3, 1.9, 8.52),
            _row("hydra", [25.0] * 3, 0.0, 8.0)]
    assert read_table(rows, "", "32x224x224")[0] == (
        "Fastest plan level with MSA within the seed spread (std up to 21.4: a gap under 42.8 is luck here): "
        "`hydra@converted`, 92.1 against MSA's 85.8, 8.52x MSA's speed at 32x224x224.")


def test_without_msa_or_without_timing_it_says_only_what_it_can():
    assert read_table([_row("hydra", [18.0], 0.0, 1.0), _row("hybrid2", [40.0], 0.0, 1.1)]) == []
    untimed = [_row("msa", [50.0], 0.0, float("nan")),
               _row("hybrid2", [49.5], 0.0, float("nan"), attention="msa x10, hydra@[10, 11]")]
    assert read_table(untimed) == [
        "Fastest plan within 1.0 points of MSA: `hybrid2`, 49.5 against MSA's 50.0 (1 seed: no spread measured), "
        "not timed."]


def test_plans_level_with_msa_but_no_faster_are_not_recommended():
    rows = [_row("msa", [50.0], 0.0, 1.0), _row("hybrid2", [49.8], 0.0, 0.97, attention="msa x10, hydra@[10, 11]"),
            _row("hydra", [20.0], 0.0, 2.3)]
    assert read_table(rows)[0] == "No plan faster than MSA keeps its accuracy (level with it but no faster: `hybrid2`)."


def test_only_plans_made_of_neighbourhood_attention_count_as_having_no_global_path():
    rows = [_row("msa", [50.0], 0.0, 1.0), _row("linear2", [45.0], 0.0, 2.0, attention="linear x12"),
            _row("hybrid2", [49.0], 0.0, 1.1, attention="msa x10, hydra@[10, 11]"),
            _row("vitdet8_msa", [48.0], 0.0, 1.6, attention="window x8, msa@[2, 5, 8, 11]"),
            _row("local+dwc7", [40.0], 0.0, 2.2, attention="local+dwc7 x12"),
            _row("vitdet8_windows", [41.0], 0.0, 2.3, attention="window x12")]
    assert read_table(rows)[1].startswith("Global mixing: MSA 50.0 against 41.0 for `vitdet8_windows`, which has no")


def test_the_users_tolerance_sets_how_much_accuracy_a_faster_plan_may_give_up_and_what_a_cost_must_exceed():
    rows = [_row("msa", [50.0] * 3, 0.2, 1.0),
            _row("vitdet8_msa", [49.6] * 3, 0.2, 1.66, attention="window x8, msa@[2, 5, 8, 11]"),
            _row("hydra+mean+dwc7@converted", [47.5] * 3, 0.3, 2.14, global_cost=2.5, global_cost_std=0.2)]
    assert read_table(rows, "", "1024x1024")[0].startswith("Fastest plan within 1.0 points of MSA: `vitdet8_msa`")
    assert read_table(rows, "", "1024x1024", tolerance=3.0) == [
        "Fastest plan within 3.0 points of MSA: `hydra+mean+dwc7@converted`, 47.5 against MSA's 50.0 (3 seeds, std "
        "up to 0.3), 2.14x MSA's speed at 1024x1024.",
        "The backbone's global term, zeroed at evaluation, costs nothing that counts (under 3.0 points or twice its "
        "seed spread) in any plan."]
    close = [_row("msa", [50.0] * 3, 0.1, 1.0),
             _row("vitdet8_msa", [49.8] * 3, 0.1, 1.66, attention="window x8, msa@[2, 5, 8, 11]")]
    assert read_table(close, "", "1024x1024", tolerance=0.25)[0].startswith(
        "Fastest plan within 0.25 points of MSA: `vitdet8_msa`")
    with pytest.raises(ValueError, match="reading tolerance: expected points >= 0, got -1.0"):
        read_table(rows, tolerance=-1.0)
