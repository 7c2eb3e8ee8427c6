"""Issue 21's scores of a run: (a) skills, (b) transfer by separated intervals, (c) per-layer change profile."""

from types import SimpleNamespace

from layerswap.report.transfer import RIVALS, layer_profile, skills, transfer

LANGS = ["toy_a", "toy_b", "toy_c", "toy_d"]


def table1(swap_by_lang: dict[str, tuple[float, float]]):
    intervals = {}
    for lang in LANGS:
        for rival in RIVALS:
            intervals[((lang, "avg"), rival)] = (10.0, 20.0)
        intervals[((lang, "avg"), "swap_default")] = swap_by_lang[lang]
    return SimpleNamespace(intervals=intervals)


def test_transfer_needs_separation_from_every_rival_in_enough_languages():
    above, touching, below = (20.5, 30.0), (19.0, 30.0), (1.0, 5.0)
    three = table1({"toy_a": above, "toy_b": above, "toy_c": above, "toy_d": below})
    out = transfer(three, LANGS, 3)
    assert out["holds"] and out["languages_won"] == ["toy_a", "toy_b", "toy_c"]
    assert out["relations"]["toy_d"] == {r: -1 for r in RIVALS}
    two = table1({"toy_a": above, "toy_b": above, "toy_c": touching, "toy_d": below})
    assert not transfer(two, LANGS, 3)["holds"] and transfer(two, LANGS, 2)["holds"]
    # one rival that overlaps is enough to lose a language
    one_rival = table1(dict.fromkeys(LANGS, above))
    one_rival.intervals[(("toy_b", "avg"), "soup_best")] = (10.0, 25.0)
    assert transfer(one_rival, LANGS, 4)["languages_won"] == ["toy_a", "toy_c", "toy_d"]


def test_skills_need_separated_comprehension_and_higher_bleu_both_ways():
    iv, cells = {(("mgsm", "en"), "math"): (60.0, 80.0), (("mgsm", "en"), "base"): (5.0, 20.0)}, {}
    for lang in LANGS:
        iv[(("belebele", lang), lang)], iv[(("belebele", lang), "base")] = (40.0, 60.0), (10.0, 30.0)
        for pair in (f"en-{lang}", f"{lang}-en"):
            cells[(("flores", pair), lang)], cells[(("flores", pair), "base")] = 12.0, 0.1
    cells[(("mgsm", "en"), "math")], cells[(("mgsm", "en"), "base")] = 0.7, 0.125
    t5 = SimpleNamespace(intervals=iv, cells=cells)
    assert skills(t5, LANGS)["holds"] and skills(t5, LANGS)["mgsm_en"] == {"math": 70.0, "base": 12.5}
    cells[(("flores", "toy_c-en"), "toy_c")] = 0.0
    out = skills(t5, LANGS)
    assert not out["holds"] and out["languages"]["toy_c"] == {"belebele": True, "flores": False}
    iv[(("mgsm", "en"), "math")] = (15.0, 30.0)  # overlaps the base: not shown
    assert not skills(t5, LANGS)["math_en_above_base"]


def test_layer_profile_middle_share_and_paper_pattern(tmp_path):
    rows = ["expert,layer,matrix,mean_abs_change,n_rows"]
    for layer in range(4):
        math = 3.0 if layer in (1, 2) else 1.0  # math changes peak in the middle
        lang = 1.0 if layer in (1, 2) else 3.0  # language changes sit at the ends
        for matrix in ("q_proj", "down_proj"):
            rows.append(f"math,{layer},{matrix},{math},8")
            rows += [f"toy_a,{layer},{matrix},{lang},8", f"toy_b,{layer},{matrix},{lang},8"]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    out = layer_profile(tmp_path / "m.csv", range(1, 3))
    assert out["math"]["middle_share"] == 0.75 and out["language"]["middle_share"] == 0.25
    assert out["math"]["peak_layer"] == 1 and out["paper_pattern"] is True and out["flat_share"] == 0.5
    assert abs(sum(out["language"]["profile"]) - 1) < 1e-3
    assert layer_profile(tmp_path / "m.csv", range(0, 1))["paper_pattern"] is False
    # both kinds above the flat share (math the higher): not the paper's pattern
    same = [r for r in rows if not r.startswith("toy_")]
    same += [r.replace("math,", "toy_a,", 1).replace(",3.0,", ",2.0,") for r in rows if r.startswith("math,")]
    (tmp_path / "same.csv").write_text("\n".join(same) + "\n")
    both = layer_profile(tmp_path / "same.csv", range(1, 3))
    assert both["math"]["middle_share"] > both["language"]["middle_share"] > both["flat_share"]
    assert both["paper_pattern"] is False
