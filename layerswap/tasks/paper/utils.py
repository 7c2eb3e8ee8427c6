"""Helpers of the paper task YAMLs (`layerswap/tasks/paper/`), referenced as `!function utils.<name>`.

Data comes from the Hugging Face hub, pre-staged by `layerswap prestage`
(`layerswap.workflow.prestage.evaluation_artefacts`) and read offline by `layerswap evaluate` (HF_HUB_OFFLINE /
HF_DATASETS_OFFLINE set).
"""

from __future__ import annotations


def load_flores_pair(
    src: str,
    tgt: str,
    src_name: str,
    tgt_name: str,
    split: str = "devtest",
    path: str = "openlanguagedata/flores_plus",
    **_metadata,
):
    """FLORES+ (the maintained FLORES-200) has one config per language; a translation item needs two of them. Rows are
    paired by `id` (the sentence id, the same in every language) and hold src_text/tgt_text plus the language names
    that the prompt uses. Returns {split: Dataset} in the source's row order."""
    import datasets

    src_ds = datasets.load_dataset(path, src, split=split)
    tgt_ds = datasets.load_dataset(path, tgt, split=split)
    tgt_by_id = {row["id"]: row["text"] for row in tgt_ds}
    rows = []
    for row in src_ds:
        if row["id"] not in tgt_by_id:
            raise ValueError(f"{path}: sentence id {row['id']} of {src}/{split} missing in {tgt}/{split}")
        rows.append(
            {
                "id": row["id"],
                "src_text": row["text"],
                "tgt_text": tgt_by_id[row["id"]],
                "src_name": src_name,
                "tgt_name": tgt_name,
            }
        )
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})


def _corpus_bleu(items, tokenize: str) -> float:
    """sacreBLEU corpus BLEU of lm-eval's (reference, prediction) items, with one reference per item."""
    import sacrebleu

    refs, preds = zip(*items) if items else ((), ())
    return sacrebleu.corpus_bleu([str(p) for p in preds], [[str(r) for r in refs]], tokenize=tokenize).score


def bleu_13a(items) -> float:
    """Aggregation (lm-eval `!function`): sacreBLEU's default 13a tokenizer, for targets written with spaces."""
    return _corpus_bleu(items, "13a")


bleu_13a.sacrebleu_tokenize = "13a"  # recorded in each evaluation file (layerswap.evaluation.tasks.task_settings)


def bleu_ja_mecab(items) -> float:
    """Aggregation for Japanese targets: sacreBLEU's ja-mecab tokenizer (MeCab with IPADIC; sacrebleu[ja])."""
    return _corpus_bleu(items, "ja-mecab")


bleu_ja_mecab.sacrebleu_tokenize = "ja-mecab"


def mbpp_execute(resps, docs) -> list[list[str]]:
    """Filter (lm-eval `custom`): outcome per generation, run in `layerswap.evaluation.sandbox` (opt-in only)."""
    from layerswap.evaluation.sandbox import execute_all

    return execute_all(resps, docs)


def mbpp_process_results(doc: dict, results: list[str]) -> dict:
    from layerswap.evaluation.sandbox import pass_at_1

    return pass_at_1(doc, results)
