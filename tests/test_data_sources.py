"""Hub data sources without the hub: normalisers on rows in each real source's schema, the hub-data selection
(language filter, dedup, FLORES overlap removal, seeded sample, manifest), prepare-base, prestage and cost.

Fixture rows copy the field names of each dataset's hub card (dataset viewer / README) as given in
config/paper.yaml's `data_sources` (which maps them onto the normalisers' schemas); the texts are made up.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from conftest import REPO, read_jsonl

from layerswap.config import load_config
from layerswap.data import hub, prepare_base
from layerswap.data.mixes import OverlapFilter, build_mix, examples, normalise, overlap_key, to_schema
from layerswap.errors import UserError
from layerswap.layout import Layout
from layerswap.workflow import cost as cost_mod
from layerswap.workflow import prestage

PAPER = REPO / "config" / "paper.yaml"

# One row per paper source, in the hub dataset's own columns and row shapes (scripts/hub_replica/EVIDENCE.md).
HUB_ROWS = {
    # microsoft/orca-math-word-problems-200k: question, answer
    "orca_math": {"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "Tom has 3 + 4 = 7 apples."},
    # CohereForAI/aya_dataset: inputs, targets, language, language_code, annotation_type, user_id
    "aya": {
        "inputs": "Taja miji mitatu ya Kenya.",
        "targets": "Nairobi, Mombasa na Kisumu.",
        "language": "Swahili",
        "language_code": "swh",
        "annotation_type": "original-annotations",
        "user_id": "u1",
    },
    # allenai/nllb's TSV files, read by the csv builder with the column names paper.yaml gives: the pair's two
    # FLORES codes, then laser_score, the two LID scores, sources and URLs
    "nllb": {
        "eng_Latn": "The house is red.",
        "swh_Latn": "Nyumba ni nyekundu.",
        "laser_score": 1.21,
        "source_sentence_lid": 0.99,
        "target_sentence_lid": 0.98,
        "source_sentence_source": "cc",
        "source_sentence_url": "_",
        "target_sentence_source": "cc",
        "target_sentence_url": "_",
    },
    # lelapa/Inkuba-instruct: instruction, inputs, targets (+ task, lang)
    "inkuba": {
        "instruction": "Tafsiri sentensi hii kwa Kiingereza.",
        "inputs": "Habari ya asubuhi.",
        "targets": "Good morning.",
        "task": "mt",
        "lang": "swahili",
    },
    # bigscience/xP3mt: inputs, targets
    "xp3mt": {"inputs": "Translate to Swahili: I like tea.", "targets": "Ninapenda chai."},
    # Telugu-LLM-Labs/telugu_alpaca_yahma_cleaned_filtered_romanized: telugu_instruction, telugu_input,
    # telugu_output (+ the English instruction, input, output)
    "tel_mt_instructions": {
        "telugu_instruction": "మూడు రంగులు చెప్పండి.",
        "telugu_input": "",
        "telugu_output": "ఎరుపు, నీలం, పసుపు.",
        "instruction": "Name three colours.",
        "input": "",
        "output": "Red, blue, yellow.",
    },
    # ai4bharat/indic-align, Indic_ShareLlama: one column per language holding the conversation as a list of
    # [user, assistant] pairs (+ doc_id, num_turns)
    "indic_align": {
        "doc_id": "d1",
        "num_turns": 2,
        "eng_Latn": [["Hi", "Hello"]],
        "ben_Beng": [["নমস্কার, কেমন আছেন?", "আমি ভালো আছি।"], ["ধন্যবাদ", "স্বাগতম"]],
    },
    # lumatic-ai/BongChat-v1-253k: instruction, input, output
    "bongchat": {"instruction": "একটি কবিতার নাম বলুন।", "input": "", "output": "সোনার তরী।"},
    # izumi-lab/llm-japanese-dataset: instruction, input, output
    "llm_japanese": {"instruction": "次の単語を英語に翻訳してください。", "input": "猫", "output": "cat"},
    # p1atdev/ichikara-instruction (config 20231115-1): ID, text, output
    "ichikara": {"ID": "ichikara-0001", "text": "日本の首都はどこですか。", "output": "東京です。"},
    # kunishou/databricks-dolly-15k-ja: instruction, input, output, category, index
    "dolly_ja": {
        "instruction": "富士山の高さは?",
        "input": "",
        "output": "3776メートルです。",
        "category": "open_qa",
        "index": "0",
    },
}
EXPECTED = {
    "orca_math": [("Tom has 3 apples and buys 4 more. How many?", "Tom has 3 + 4 = 7 apples.")],
    "aya": [("Taja miji mitatu ya Kenya.", "Nairobi, Mombasa na Kisumu.")],
    "nllb": [
        ("translate en to swh : The house is red.", "Nyumba ni nyekundu."),
        ("translate swh to en : Nyumba ni nyekundu.", "The house is red."),
    ],
    "inkuba": [("Tafsiri sentensi hii kwa Kiingereza.\n\nHabari ya asubuhi.", "Good morning.")],
    "xp3mt": [("Translate to Swahili: I like tea.", "Ninapenda chai.")],
    "tel_mt_instructions": [("మూడు రంగులు చెప్పండి.", "ఎరుపు, నీలం, పసుపు.")],
    "indic_align": [("নমস্কার, কেমন আছেন?", "আমি ভালো আছি।")],
    "bongchat": [("একটি কবিতার নাম বলুন।", "সোনার তরী।")],
    "llm_japanese": [("次の単語を英語に翻訳してください。\n\n猫", "cat")],
    "ichikara": [("日本の首都はどこですか。", "東京です。")],
    "dolly_ja": [("富士山の高さは?", "3776メートルです。")],
}
LANG = {
    "orca_math": "en",
    "aya": "swh",
    "nllb": "swh",
    "inkuba": "swh",
    "xp3mt": "swh",
    "tel_mt_instructions": "tel",
    "indic_align": "ben",
    "bongchat": "ben",
    "llm_japanese": "jpn",
    "ichikara": "jpn",
    "dolly_ja": "jpn",
}


@pytest.fixture(scope="module")
def paper():
    return load_config(PAPER)


def test_every_paper_source_has_a_fixture(paper):
    assert set(paper["data_sources"]) == set(HUB_ROWS)


@pytest.mark.parametrize("name", sorted(HUB_ROWS))
def test_hub_row_to_schema_to_examples(paper, name, tmp_path):
    src = paper["data_sources"][name]
    columns = hub.source_spec(paper, name, LANG[name])["columns"]  # placeholders filled for this language
    doc = to_schema(HUB_ROWS[name], src["schema"], columns, name)
    assert examples(doc, src["schema"], LANG[name]) == EXPECTED[name]
    # the written file (source schema) normalises the same way through the mix's reader
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
    rows = normalise(path, src["schema"], LANG[name], name)
    assert [(r["prompt"], r["response"]) for r in rows] == EXPECTED[name]


def test_schema_edge_cases():
    assert examples({"instruction": "a", "output": "  "}, "alpaca", "jpn") == []  # blank answer
    assert examples({"instruction": "a", "output": "b"}, "alpaca", "jpn") == [("a", "b")]  # no input column
    plain = {"conversations": ["q1", "a1", "q2", "a2"]}  # plain-string turns
    assert examples(plain, "sharegpt", "ben") == [("q1", "a1")]
    roles = {
        "conversations": json.dumps(
            [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a"},
            ]
        )
    }
    assert examples(roles, "sharegpt", "ben") == [("q", "a")]
    pairs = {"conversations": [["q", "a"], ["q2", "a2"]]}  # IndicAlign's pairs
    assert examples(pairs, "sharegpt", "ben") == [("q", "a")]
    with pytest.raises(ValueError, match="3 items, not 2"):
        examples({"conversations": [["q", "a", "x"]]}, "sharegpt", "ben")
    with pytest.raises(UserError, match="data source 'x': no column 'telugu_output' \\(for response\\)"):
        to_schema(
            {"telugu_instruction": "a"}, "alpaca", {"prompt": "telugu_instruction", "response": "telugu_output"}, "x"
        )
    with pytest.raises(UserError, match="unknown schema 'dolly'"):
        to_schema({}, "dolly", None, "x")


def test_overlap_filter_matches_normalised_sentences():
    sentences = ["The committee met on Tuesday to discuss the budget.", "Short one."]
    f = OverlapFilter(sentences)
    assert f.size == 1  # sentences under 20 normalised characters are not indexed (too many false hits)
    assert f.contains("Translate: the  COMMITTEE met on tuesday, to discuss the budget!! -> ...")
    assert not f.contains("The committee met on Wednesday to discuss the budget.")
    assert f.row_contains(
        {"inputs": "x", "targets": ["y", {"z": "the committee met on Tuesday to discuss the budget"}]}
    )
    assert not OverlapFilter([]).contains("anything")
    assert overlap_key("Ｆｕｌｌ-width, Ünïcode!") == "fullwidthünïcode"


class FakeHub:
    """`load` for write_source: datasets.Dataset objects built from rows, keyed by (hub_id, subset, split)."""

    def __init__(self, tables: dict):
        import datasets

        self.tables = {k: datasets.Dataset.from_list(v) for k, v in tables.items()}
        self.calls = []

    def __call__(self, item):
        key = (item["hub_id"], item.get("subset"), item.get("split"))
        self.calls.append(key)
        return self.tables[key]


FLORES_SWH = "Wanasayansi wanasema kwamba mlipuko huo ulisababishwa na gesi."
FLORES_ENG = "Scientists say the explosion was caused by a gas leak in the building."


def _xp3_hub():
    rows = [{"inputs": f"Tafsiri: sentensi {i}.", "targets": f"sentence {i}."} for i in range(40)]
    rows += [{"inputs": "Tafsiri: sentensi 3.", "targets": "sentence 3."}] * 5  # duplicates
    rows += [
        {"inputs": f"Translate to Swahili: {FLORES_ENG}", "targets": "x"},  # FLORES (eng)
        {"inputs": "Translate to English", "targets": FLORES_SWH.upper()},  # FLORES (swh)
        {"inputs": "  ", "targets": "blank prompt"},
    ]
    flores = {
        ("openlanguagedata/flores_plus", code, split): [{"text": s, "id": 1}]
        for code, s in (("eng_Latn", FLORES_ENG), ("swh_Latn", FLORES_SWH))
        for split in ("dev", "devtest")
    }
    return FakeHub({("bigscience/xP3mt", None, "train"): rows, **flores})


def test_hub_data_dedups_removes_flores_samples_and_writes_manifest(paper, tmp_path):
    spec = hub.source_spec(paper, "xp3mt", "swh")
    assert spec["n"] == 10000 and spec["data_files"] == "sw/train/*.parquet" and len(spec["flores"]) == 4
    assert spec["revision"] == "refs/convert/parquet"
    spec["n"] = 40  # every clean, distinct row
    fake = _xp3_hub()
    info = hub.write_source(spec, 0, tmp_path / "xp3mt_swh.jsonl", tmp_path / "xp3mt_swh.manifest.json", load=fake)
    rows = read_jsonl(tmp_path / "xp3mt_swh.jsonl")
    assert len(rows) == 40 and len({r["inputs"] for r in rows}) == 40
    assert not any("explosion" in r["inputs"].lower() or "wanasayansi" in r["targets"].lower() for r in rows)
    manifest = json.loads((tmp_path / "xp3mt_swh.manifest.json").read_text())
    assert manifest == info
    assert (
        manifest["rows_in_split"],
        manifest["kept_rows"],
        manifest["overlap"],
        manifest["blank"],
        manifest["duplicate"],
        manifest["overlap_sentences"],
    ) == (48, 40, 2, 1, 5, 2)
    # seeded: same seed, same file; other seed, other order
    hub.write_source(spec, 0, tmp_path / "again.jsonl", tmp_path / "again.manifest.json", load=fake)
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "xp3mt_swh.jsonl").read_bytes()
    spec["n"] = 41
    with pytest.raises(UserError, match="only 40 usable examples .* the mix asks for 41"):
        hub.write_source(spec, 0, tmp_path / "x.jsonl", tmp_path / "x.manifest.json", load=fake)


def test_hub_data_filters_language_and_samples_with_a_seed(paper, tmp_path):
    spec = hub.source_spec(paper, "aya", "tel")
    assert (spec["language_column"], spec["language_value"]) == ("language", "Telugu")
    rows = [
        {**HUB_ROWS["aya"], "inputs": f"q{i}", "targets": f"a{i}", "language": ("Telugu", "Swahili")[i % 2]}
        for i in range(200)
    ]
    fake = FakeHub({("CohereForAI/aya_dataset", None, "train"): rows})
    spec["n"] = 30
    first = hub.write_source(spec, 0, tmp_path / "a.jsonl", tmp_path / "a.manifest.json", load=fake)
    kept = read_jsonl(tmp_path / "a.jsonl")
    assert len(kept) == 30 and all(int(r["inputs"][1:]) % 2 == 0 for r in kept)
    assert set(kept[0]) == {"inputs", "targets"}  # rows in the aya schema, as the mix reads them
    assert (first["rows_in_split"], first["rows_in_language"]) == (200, 100)
    hub.write_source(spec, 1, tmp_path / "b.jsonl", tmp_path / "b.manifest.json", load=fake)
    assert read_jsonl(tmp_path / "b.jsonl") != kept  # another seed, another sample
    # the mix beside it: counts and a manifest that embeds the source's own manifest
    counts = build_mix(
        [{"name": "aya", "schema": "aya", "path": str(tmp_path / "a.jsonl"), "n": 30, "lang": "tel"}],
        0,
        tmp_path / "sft" / "tel.jsonl",
        tmp_path / "sft" / "tel.manifest.json",
    )
    mix_manifest = json.loads((tmp_path / "sft" / "tel.manifest.json").read_text())
    assert counts == mix_manifest["counts"] == {"aya:tel": 30}
    assert mix_manifest["sources"][0]["source_manifest"]["hub_id"] == "CohereForAI/aya_dataset"


def test_nllb_spec_fills_the_pair_code(paper):
    """allenai/nllb is a loading script: its TSV files are read with the csv builder, columns named by the pair."""
    spec = hub.source_spec(paper, "nllb", "ben")
    assert (spec["builder"], spec["schema"], spec["n"]) == ("csv", "nllb", 12000)
    assert spec["data_files"].endswith("/nllb/ben_Beng-eng_Latn.gz")
    assert spec["builder_kwargs"]["column_names"][:3] == ["ben_Beng", "eng_Latn", "laser_score"]
    assert spec["columns"] == {"translation": ["ben_Beng", "eng_Latn"]}
    row = {"ben_Beng": "বাড়িটি লাল।", "eng_Latn": "The house is red.", "laser_score": 1.1}
    doc = to_schema(row, "nllb", spec["columns"], "nllb")
    assert examples(doc, "nllb", "ben") == [
        ("translate en to ben : The house is red.", "বাড়িটি লাল।"),
        ("translate ben to en : বাড়িটি লাল।", "The house is red."),
    ]
    assert hub.needed_sources(paper)[("orca_math", "en")] == 40000


# ----------------------------------------------------------------------------------------------------------------
# prepare-base


def _model_dir(path: Path, weights: str = "model.safetensors") -> Path:
    path.mkdir(parents=True)
    for name in (
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        weights,
        "README.md",
    ):
        (path / name).write_text("{}")
    return path


def test_prepare_base_links_a_local_directory(tmp_path):
    src = _model_dir(tmp_path / "llama")
    names = prepare_base.prepare_base(str(src), tmp_path / "base")
    assert names[-1] == "config.json" and "README.md" not in names
    assert (tmp_path / "base" / "model.safetensors").resolve() == (src / "model.safetensors").resolve()
    assert json.loads((tmp_path / "base" / "layerswap_source.json").read_text())["directory"] == str(src.resolve())


def test_prepare_base_refuses_pickle_only_weights(tmp_path):
    src = _model_dir(tmp_path / "old", weights="pytorch_model.bin")
    with pytest.raises(UserError, match=r"only pickle weights \(pytorch_model.bin\); need \*.safetensors") as err:
        prepare_base.prepare_base(str(src), tmp_path / "base")
    assert "\n" not in str(err.value)


def test_prepare_base_from_the_prestaged_cache(tmp_path):
    snap = _model_dir(tmp_path / "snapshots" / "abc")
    seen = []
    prepare_base.prepare_base(
        "meta-llama/Llama-3.1-8B", tmp_path / "base", "abc", snapshot_fn=lambda item: seen.append(item) or snap
    )
    assert seen[0]["hub_id"] == "meta-llama/Llama-3.1-8B" and seen[0]["revision"] == "abc"
    assert (tmp_path / "base" / "config.json").is_symlink()


# ----------------------------------------------------------------------------------------------------------------
# prestage


def test_prestage_dry_run_lists_every_artefact_without_network(paper, monkeypatch):
    def no_network(*a, **k):
        raise AssertionError("network touched")

    monkeypatch.setattr(hub, "snapshot", no_network)
    monkeypatch.setattr(hub, "load_dataset", no_network)
    out = io.StringIO()
    items = prestage.prestage(paper, dry_run=True, out=out)
    got = {
        (
            i["kind"],
            i["hub_id"],
            i.get("subset"),
            i.get("split"),
            i.get("data_files"),
            (i.get("spec") or {}).get("language_value"),
        )
        for i in items
    }
    expected = {("model", "meta-llama/Llama-3.1-8B", None, None, None, None)}
    for name, src in paper["data_sources"].items():
        for lang in src.get("languages") or ["en"]:
            code = (src.get("languages") or {}).get(lang)
            fill = {
                "code": code,
                "lang": lang,
                "src": (code or "").partition("-")[0],
                "tgt": (code or "").partition("-")[2],
            }
            subset = src["subset"].format(**fill) if src.get("subset") else None
            files = src["data_files"].format(**fill) if src.get("data_files") else None
            value = code if src.get("language_column") else None  # one check per language a filter selects
            expected.add(("dataset", src["hub_id"], subset, src["split"], files, value))
    expected |= {
        ("dataset", "openlanguagedata/flores_plus", c, s, None, None)
        for c in ("eng_Latn", "swh_Latn")
        for s in ("dev", "devtest")
    }
    expected |= {
        ("dataset", a["hub_id"], a.get("subset"), a.get("split"), None, None)
        for a in prestage.evaluation_artefacts(paper)
    }
    assert got == expected and len(items) == len(expected)
    model = next(i for i in items if i["kind"] == "model")
    assert model["allow_patterns"] == ["*.safetensors", "*.json", "tokenizer*"]
    text = out.getvalue()
    assert text.count("would fetch") == len(items) and f"{len(items)} artefacts listed" in text


def test_prestage_fetches_each_artefact_once_and_skips_a_local_base(paper, tmp_path):
    cfg = json.loads(json.dumps(paper))
    cfg["base"]["source"] = str(_model_dir(tmp_path / "local"))
    models, datasets_ = [], []
    items = prestage.prestage(cfg, out=io.StringIO(), fetch_model=models.append, fetch_dataset=datasets_.append)
    assert models == [] and len(datasets_) == len(items) and all(i["kind"] == "dataset" for i in items)


def test_prestage_cli_dry_run(capsys):
    from layerswap.cli import main

    assert main(["prestage", "--configfile", str(PAPER), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would fetch model meta-llama/Llama-3.1-8B" in out and "token" not in out.lower()


def test_prestage_adds_the_bases_of_the_selected_ablations(paper):
    abl_dir = REPO / "config" / "ablations"
    cfg = json.loads(json.dumps(paper))
    cfg.pop("ablations", None)  # absent: every ablation, different_base's second base included
    items = prestage.prestage(cfg, dry_run=True, out=io.StringIO(), ablations_dir=abl_dir)
    extra = [i for i in items if i.get("purpose", "").startswith("ablation")]
    assert [(i["kind"], i["hub_id"], i["purpose"]) for i in extra] == [
        ("model", "meta-llama/Meta-Llama-3-8B", "ablation different_base: base b2")
    ]
    assert len(items) == len(prestage.prestage(cfg, dry_run=True, out=io.StringIO())) + 1
    cfg["ablations"] = ["layer_count", "lora"]
    assert not [
        i
        for i in prestage.prestage(cfg, dry_run=True, out=io.StringIO(), ablations_dir=abl_dir)
        if i.get("purpose", "").startswith("ablation")
    ]


# ----------------------------------------------------------------------------------------------------------------
# plan cost


def test_cost_exact_numbers_from_counts():
    counts = {
        "hub_data": 3,
        "sft_mix": 2,
        "sft": 4,
        "evaluate_checkpoints": 8,
        "select": 2,
        "merge_recipes": 6,
        "evaluate_merges": 6,
        "tables": 1,
        "swap_grid": 1,
    }
    estimates = {
        "hub_data": {"cpu_hours": 0.5, "disk_gb": 0.1},
        "sft": {"gpu_hours": 8.0, "disk_gb": 130},
        "evaluate_checkpoints": {"gpu_hours": 0.25},
        "evaluate_merges": {"gpu_hours": 2.0},
        "merge_recipes": {"cpu_hours": 0.01},
        "heatmap": {"cpu_hours": 1},
    }
    cost = cost_mod.plan_cost(counts, estimates)
    assert cost["total"] == {"jobs": 33, "gpu_hours": 46.0, "cpu_hours": 1.56, "disk_gb": 520.3, "peak_disk_gb": 520.3}
    assert cost["stages"]["sft"] == {"jobs": 4, "gpu_hours": 32.0, "cpu_hours": 0.0, "disk_gb": 520.0}
    assert cost["stages"]["selection"] == {"jobs": 10, "gpu_hours": 2.0, "cpu_hours": 0.0, "disk_gb": 0.0}
    assert cost["stages"]["evaluation"]["gpu_hours"] == 12.0
    assert cost["no_estimate"] == ["select", "sft_mix", "swap_grid", "tables"]
    assert cost["unused_estimates"] == ["heatmap"]
    text = cost_mod.format_cost(cost)
    assert "total" in text and "46.0" in text and "520.3" in text


def test_cost_peak_disk_counts_the_scratch_of_jobs_running_at_once():
    """SFT's Trainer state is deleted once a run is complete: kept disk excludes it, the peak includes it for the
    runs that train at once."""
    counts = {"sft": 18, "evaluate_merges": 4}
    estimates = {"sft": {"gpu_hours": 8.0, "disk_gb": 130, "scratch_gb": 192}}
    every = cost_mod.plan_cost(counts, estimates)
    assert every["total"]["disk_gb"] == 18 * 130 and every["total"]["peak_disk_gb"] == 18 * 130 + 18 * 192
    four = cost_mod.plan_cost(counts, estimates, concurrent=4)
    assert four["total"]["disk_gb"] == 18 * 130 and four["total"]["peak_disk_gb"] == 18 * 130 + 4 * 192
    assert (
        "peak disk: 3,108.0 GB = 2,340.0 GB kept + scratch while jobs run (sft 768.0 GB; at most 4 jobs"
        in cost_mod.format_cost(four)
    )


def test_parse_job_stats():
    text = "Building DAG of jobs...\nJob stats:\njob      count\n-----  -----\nsft          3\nall 1\ntotal 4\n\nx"
    assert cost_mod.parse_job_stats(text) == {"sft": 3}


def test_cost_cli_counts_jobs_with_a_dry_run(tmp_path, capsys):
    """The micro config, with estimates added: counts come from Snakemake's own dry run."""
    from layerswap.cli import main

    cfg = yaml.safe_load((REPO / "config" / "micro.yaml").read_text())
    cfg["estimates"] = {
        "sft": {"gpu_hours": 1.5, "disk_gb": 2},
        "merge_recipes": {"cpu_hours": 0.5},
        "select": {"cpu_hours": 0.25},
    }
    path = tmp_path / "micro_cost.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["cost", "--configfile", str(path), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    rules = cost["rules"]
    # 3 SFT runs (math, toy_swh, joint_toy_swh); 3 merge configs x 1 language; 3 expert types selected
    assert (rules["sft"]["jobs"], rules["merge_recipes"]["jobs"], rules["select"]["jobs"]) == (3, 3, 3)
    # the base's parameter count is known (the toy's 106,784), so the sft disk is every kept checkpoint's bytes,
    # not the estimate's 2 GB a job: 3 runs x 2 checkpoints x 106,784 parameters x 4 bytes (float32)
    assert (rules["sft"]["gpu_hours"], rules["sft"]["disk_gb"]) == (4.5, round(3 * 2 * 106_784 * 4 / 1e9, 6))
    assert (rules["merge_recipes"]["cpu_hours"], rules["select"]["cpu_hours"]) == (1.5, 0.75)
    assert cost["total"]["gpu_hours"] == 4.5 and cost["total"]["cpu_hours"] == 2.25


# ----------------------------------------------------------------------------------------------------------------
# the hf data rules end to end, offline: local dataset directories stand in for the pre-staged hub cache


@pytest.mark.workflow
def test_hf_data_rules_offline(paper, tmp_path):
    from conftest import snakemake

    work = tmp_path / "work"
    cfg = json.loads(json.dumps(paper))
    cfg["languages"] = ["swh"]
    cfg["analysis"]["table2_language"] = "swh"
    cfg["mixes"] = {
        "math": {"orca_math": 20},
        "language": {"swh": {"aya": 10, "xp3mt": 12}},
        "joint": ["math", "language"],
    }
    cfg["sft"]["runs"] = {r: v for r, v in cfg["sft"]["runs"].items() if v["expert"] in ("math", "swh", "joint_swh")}
    for name, rows in {
        "orca": [{"question": f"q{i}?", "answer": f"a{i}"} for i in range(30)],
        "aya": [{**HUB_ROWS["aya"], "inputs": f"swali {i}", "language": "Swahili"} for i in range(15)]
        + [{**HUB_ROWS["aya"], "inputs": f"prashna {i}", "language": "Telugu"} for i in range(15)],
        "xp3": [{"inputs": f"Tafsiri {i}", "targets": f"t{i}"} for i in range(15)]
        + [{"inputs": f"Translate: {FLORES_ENG}", "targets": "x"}],
    }.items():
        (work / "hubdata" / name).mkdir(parents=True)
        (work / "hubdata" / name / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg["data_sources"]["orca_math"]["hub_id"] = "hubdata/orca"
    cfg["data_sources"]["aya"]["hub_id"] = "hubdata/aya"
    xp3 = cfg["data_sources"]["xp3mt"]
    xp3["hub_id"], xp3["exclude"] = "hubdata/xp3", []  # FLORES removal is tested above (flores_plus is gated)
    del xp3["data_files"], xp3["revision"]
    cfg["base"]["source"] = str(_model_dir(tmp_path / "llama"))
    # a run stops before its first job where the config asks vLLM and the environment has none (test_vllm_check.py)
    cfg["evaluation"]["backend"] = "hf"
    path = tmp_path / "hf.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    layout = Layout()
    proc = snakemake(work, layout.sft_mix("swh"), layout.sft_mix("joint_swh"), layout.base_config(), configfile=path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    mix = json.loads((work / layout.sft_mix("joint_swh", "manifest.json")).read_text())
    assert mix["counts"] == {"orca_math:en": 20, "aya:swh": 10, "xp3mt:swh": 12}
    (aya,) = [s for s in mix["sources"] if s["name"] == "aya"]
    assert aya["source_manifest"]["rows_in_language"] == 15
    rows = read_jsonl(work / layout.sft_mix("swh"))
    assert len(rows) == 22 and all(not r["prompt"].startswith("prashna") for r in rows)
    assert (work / layout.base() / "model.safetensors").is_symlink()


def test_preflight_imports_the_hf_libraries_before_its_threads(tmp_path):
    """The pre-flight checks run in threads; a first `import transformers` racing with `datasets` in another thread
    failed a check ("no attribute 'PreTrainedTokenizerBase'"). verify() imports both before its pool starts."""
    import subprocess
    import sys

    code = (
        "import concurrent.futures, sys\n"
        "seen = []\n"
        "class Pool(concurrent.futures.ThreadPoolExecutor):\n"
        "    def __init__(self, *a, **k):\n"
        "        t = sys.modules.get('transformers')\n"
        "        seen.append('datasets' in sys.modules and t is not None\n"
        "                    and 'PreTrainedTokenizerBase' in vars(t))\n"
        "        super().__init__(*a, **k)\n"
        "concurrent.futures.ThreadPoolExecutor = Pool\n"
        "from layerswap.data import preflight\n"
        "assert 'transformers' not in sys.modules\n"
        "preflight.verify([], None, out=open(__import__('os').devnull, 'w'))\n"
        "print(seen)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[True]"
