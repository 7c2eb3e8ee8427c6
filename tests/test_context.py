"""The context of an evaluation job (layerswap/evaluation/context.py) on the HF backend, in the test environment: the
token counts equal lm-eval's own encoding of the same requests (HFLM: `tok_batch_encode` for a generation's prompt,
`loglikelihood`'s pairing for a choice), the boundary is HFLM's (a request that just fits is not cut, one token more
would be), and `layerswap evaluate` refuses, in one line naming benchmark, language key, item and lengths, a request
that does not fit the job's `--context-tokens` (the model's context: tests/test_evaluate.py), before anything is
written. The vLLM side
(the engine's max_model_len from the requests, the same refusal): tests/test_vllm_engine.py."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

sys.path.insert(0, str(Path(__file__).parent))
from test_evaluate import make_args, make_data, make_model  # noqa: E402

from layerswap.errors import UserError  # noqa: E402
from layerswap.evaluation import evaluate as ev  # noqa: E402
from layerswap.evaluation.context import Context, Request, need, token_counts  # noqa: E402

BENCH = {"mgsm": {"shots": 2, "languages": ["en", "toy_swh"]}, "belebele": {"shots": 1}}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctx")
    vocab = make_data(root / "data")
    make_model(root / "model", vocab)
    return root


def tokenizers(world: Path):
    """The toy world's word-level tokenizer (no special tokens added), and the same with a BOS added to every text
    (as Llama's tokenizer does)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(str(world / "model"))
    bos = AutoTokenizer.from_pretrained(str(world / "model"))
    bos._tokenizer.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos.bos_token_id)])
    assert bos("a b").input_ids[0] == bos.bos_token_id != plain("a b").input_ids[0]
    return {"plain": plain, "bos": bos}


def job_requests(world: Path, tmp_path: Path) -> list[Request]:
    """The requests of BENCH's toy tasks, as `layerswap evaluate` builds them."""
    from lm_eval.tasks import TaskManager

    from layerswap.evaluation.context import build_requests
    from layerswap.evaluation.tasks import parse_benchmarks, plan_benchmarks, set_task_settings, write_task_yamls

    plans = plan_benchmarks(world / "data", parse_benchmarks(json.dumps(BENCH)))
    names = write_task_yamls(plans, tmp_path / "tasks")
    task_dict = TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False).load(names)
    set_task_settings(task_dict, plans)
    return build_requests(task_dict, plans, 0, None)


EDGES = [  # what the wrappers treat apart: a BOS already in the text, trailing spaces, an empty context
    Request("mgsm", "en", 0, "<s> tom has apples", None, 7),
    Request("belebele", "en", 1, "the answer is  ", "a cat"),
    Request("belebele", "en", 2, "<s> the answer is", " red"),
    Request("belebele", "en", 3, "", "sky blue"),
    Request("belebele", "en", 4, "", "<s> sky"),
]


@pytest.mark.parametrize("kind", ["plain", "bos"])
def test_token_counts_equal_hflms_own_encoding(world, tmp_path, kind):
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM

    tok = tokenizers(world)[kind]
    lm = HFLM(pretrained=AutoModelForCausalLM.from_pretrained(str(world / "model")), tokenizer=tok, batch_size=1)
    requests = job_requests(world, tmp_path) + EDGES
    assert {r.continuation is None for r in requests} == {True, False}
    pairs = []
    lm._loglikelihood_tokens = lambda reqs, disable_tqdm=False: pairs.extend(reqs) or [(0.0, True)] * len(reqs)
    for r, n in zip(requests, token_counts(requests, tok), strict=True):
        if r.continuation is None:  # generate_until encodes its prompts with tok_batch_encode
            assert n == int(lm.tok_batch_encode([r.context])[0].shape[1]), r
        else:
            pairs.clear()
            lm.loglikelihood([Instance("loglikelihood", {}, (r.context, r.continuation), 0)])
            ((_, ctx, cont),) = pairs
            assert n == len(ctx) + len(cont), r


def test_a_request_that_just_fits_is_not_cut_and_one_token_more_is_refused(world, caplog):
    """HFLM at max_length = the request's need runs it whole; at one token less it cuts it from the left (its warning,
    the only trace it leaves), and there the context refuses it."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(world / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(world / "model"))
    gen = Request("mgsm", "en", 5, "tom has apples how many", None, 4)
    ll = Request("belebele", "toy_swh", 9, "the answer is", " a cat")
    caplog.set_level(logging.WARNING, logger="lm_eval.models.huggingface")
    for r in (gen, ll):
        (n,) = token_counts([r], tok)
        fits = need(r, n, "hf")
        for length in (fits, fits - 1):
            lm = HFLM(pretrained=model, tokenizer=tok, batch_size=1, max_length=length)
            caplog.clear()
            if r.continuation is None:
                until = {"until": ["never"], "max_gen_toks": r.budget, "do_sample": False}
                lm.generate_until([Instance("generate_until", {}, (r.context, until), 0)], disable_tqdm=True)
            else:
                lm.loglikelihood([Instance("loglikelihood", {}, (r.context, r.continuation), 0)], disable_tqdm=True)
            cut = any("runcat" in m for m in caplog.messages)  # "Left truncation applied", "... Truncating ..."
            assert cut == (length < fits), (r, length, caplog.messages)
        context = Context("hf", [r])
        assert context.hf_context(context.needs(tok), fits) == fits
        with pytest.raises(UserError) as err:
            context.hf_context(context.needs(tok), fits - 1)
        line = str(err.value)
        assert "\n" not in line and line.startswith(f"{r.benchmark} {r.key} item {r.doc_id}:")
        assert f"= {fits} tokens" in line or f": {fits} tokens" in line
        assert f"over the context of {fits - 1} tokens (the model's context" in line
    assert need(ll, 3, "vllm") == 4 and need(ll, 3, "hf") == 2  # vLLM: all of it, + the one token it generates


def run(world: Path, out: Path, caplog, **kw):
    args = make_args(world / "data", out, [("m", world / "model")], BENCH)
    for k, v in kw.items():
        setattr(args, k, v)
    caplog.set_level(logging.INFO, logger="layerswap.evaluate")
    caplog.clear()
    return ev.run(args)


def test_evaluate_refuses_what_the_jobs_context_cannot_hold(world, tmp_path, caplog):
    run(world, tmp_path / "free", caplog)
    (line,) = [m for m in caplog.messages if "the longest needs" in m]
    longest = int(line.rsplit(" ", 2)[-2])
    run(world, tmp_path / "exact", caplog, context_tokens=longest)  # the plan's figure, exactly: runs, same bytes
    for f in sorted((tmp_path / "free" / "m").iterdir()):
        assert (tmp_path / "exact" / "m" / f.name).read_bytes() == f.read_bytes(), f.name
    with pytest.raises(UserError) as err:
        run(world, tmp_path / "short", caplog, context_tokens=longest - 1)
    line = str(err.value)
    assert "\n" not in line and line.startswith(("mgsm en item", "mgsm toy_swh item", "belebele "))
    assert f"= {longest} tokens, over the context of {longest - 1} tokens (--context-tokens" in line or (
        f": {longest} tokens as the hf backend feeds them, over the context of {longest - 1}" in line
    )
    assert "lm-eval would cut the prompt from the left, so it is refused" in line
    assert not (tmp_path / "short").exists(), "refused before anything is written"
