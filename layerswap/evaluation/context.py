"""The context of an evaluation job: the requests lm-eval sends, the tokens each needs, the context a model host runs
in, and one line refusing any request that does not fit it. Never cut silently: lm-eval's HFLM and vLLM wrappers both
cut an over-long prompt from the left with at most a log line (HFLM's `_loglikelihood_tokens` keeps the last
max_length + 1 tokens of context + continuation and `generate_until` the last max_length - max_gen_toks tokens of the
prompt; the vLLM wrapper does the same, one token fewer for a log-likelihood), which changes the question asked.

- `build_requests`: the requests lm-eval's `evaluate` sends, built first, here, exactly as it builds them (the same
  seeds and arguments, `cache_requests=True`): `evaluate` then reads these very instances from the job's request
  cache, so what is measured is what runs.
- `token_counts`: each request's tokens with the model's tokenizer, encoded as both wrappers encode them (their
  `tok_encode`, `TemplateLM.loglikelihood` and `_encode_pair`, lm-eval 0.4.13): a generation's prompt; a log-likelihood
  request's context + continuation. Written here because the vLLM engine's context must be known before the engine
  (and so lm-eval's wrapper) exists; tests/test_context.py checks the counts against HFLM's own encoding.
- `need`: the tokens of context a request takes on a backend: prompt + generation budget; for a log-likelihood, HFLM
  feeds context + continuation less its last token, the vLLM wrapper all of it plus the one token vLLM generates.
- `Context`: a host's requests and the job's `--context-tokens`; per model architecture (`of_model`, before any
  model is loaded) `hf_context` (HFLM's: the model's context, or less where the job says) or `vllm_context` (vLLM's
  max_model_len: the job's `--context-tokens` where given, the plan's figure, else the longest need of the requests,
  at most the model's max_position_embeddings), each refusing what does not fit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from layerswap.errors import UserError
from layerswap.evaluation.tasks import BenchmarkPlan, task_leaves

log = logging.getLogger("layerswap.evaluate")

GEN_BUDGET = 256  # tokens a generation may take where its task sets no max_gen_toks (HFLM's and the vLLM wrapper's)
CHUNK = 512  # texts per tokenizer call: only the lengths are kept, never a whole job's token ids


@dataclass(frozen=True)
class Request:
    """One request lm-eval sends: a generation (`continuation` None, `budget` its max_gen_toks) or a log-likelihood
    of `continuation` after `context` (one per answer choice of a multiple-choice item)."""

    benchmark: str
    key: str  # the language (or FLORES direction) key
    doc_id: int
    context: str
    continuation: str | None
    budget: int = 0


def reseed(task_dict: dict, seed: int) -> None:
    """What every lm-eval run of the job starts from: each task's few-shot sampler and the global generators seeded."""
    import random

    import numpy as np
    import torch

    for task in task_dict["tasks"].values():
        task.set_fewshot_seed(seed=seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_requests(task_dict: dict, plans: list[BenchmarkPlan], seed: int, samples: dict | None) -> list[Request]:
    """The requests of every task of `task_dict`, built as `lm_eval.evaluator.evaluate` builds them (rank 0 of 1, no
    limit but `samples`, no chat template, the request cache on), after `reseed`."""
    where = {}  # leaf task -> (benchmark, key); paper MBPP: one English task under every key, named by the first
    for plan in plans:
        for t in [] if plan.skipped else plan.run_tasks:
            for leaf in task_leaves(task_dict, t.name):
                where.setdefault(leaf, (plan.name, t.key))
    from lm_eval.models.utils import normalize_gen_kwargs  # both wrappers read a generation's budget with it

    reseed(task_dict, seed)
    out = []
    for name, task in task_dict["tasks"].items():
        task.build_all_requests(
            limit=None,
            samples=(samples or {}).get(name),
            rank=0,
            world_size=1,
            cache_requests=True,
            rewrite_requests_cache=False,
            system_instruction=None,
            apply_chat_template=False,
            fewshot_as_multiturn=False,
            chat_template=None,
            tokenizer_name="",
        )
        bench, key = where[name]
        for inst in task.instances:
            if inst.request_type == "generate_until":
                budget = normalize_gen_kwargs(inst.args[1] or {}, GEN_BUDGET)["max_gen_toks"]
                out.append(Request(bench, key, inst.doc_id, inst.args[0], None, budget))
            elif inst.request_type == "loglikelihood":
                out.append(Request(bench, key, inst.doc_id, inst.args[0], inst.args[1]))
            else:  # loglikelihood_rolling: no benchmark of the registry sends one
                raise UserError(f"{bench} {key}: lm-eval request type {inst.request_type} is not one layerswap counts")
    return out


def _lengths(tokenizer, texts: list[str], special: bool | None) -> dict[str, tuple[int, int | None]]:
    """{text: (its token count, its first token)} as the wrappers' `tok_encode` encodes it: with the tokenizer's special
    tokens unless `special` says otherwise, never a second BOS before a text that starts with one."""
    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    bos = tokenizer.decode(prefix) if prefix is not None else None
    with_bos = [t for t in texts if bos and t.startswith(bos)]
    plain = [t for t in texts if not (bos and t.startswith(bos))]
    out = {}
    for group, kwargs in (
        (plain, {} if special is None else {"add_special_tokens": special}),
        (with_bos, {"add_special_tokens": False}),
    ):
        for i in range(0, len(group), CHUNK):
            chunk = group[i : i + CHUNK]
            for text, ids in zip(chunk, tokenizer(chunk, return_attention_mask=False, **kwargs)["input_ids"]):
                out[text] = (len(ids), ids[0] if ids else None)
    return out


def token_counts(requests: list[Request], tokenizer) -> list[int]:
    """Per request, the tokens the wrappers encode it to: a generation's prompt; a log-likelihood request's context +
    continuation (`_encode_pair`: the context's trailing spaces moved to the continuation, the pair encoded whole and
    split after the context's own tokens; an empty context is the prefix token, BOS else EOS, unless the continuation
    starts with it)."""
    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    texts, alone = set(), set()
    for r in requests:
        if r.continuation is None:
            texts.add(r.context)
        elif r.context:
            head = r.context.rstrip()
            texts.update((head, r.context + r.continuation))
        else:
            alone.add(r.continuation)
    n = _lengths(tokenizer, sorted(texts), None)
    cont = _lengths(tokenizer, sorted(alone), False)
    out = []
    for r in requests:
        if r.continuation is None:
            out.append(n[r.context][0])
        elif r.context:
            out.append(max(n[r.context + r.continuation][0], n[r.context.rstrip()][0]))
        else:
            count, first = cont[r.continuation]
            out.append(count + (first != prefix))
    return out


def need(request: Request, tokens: int, backend: str) -> int:
    """Tokens of context `request` takes on `backend` (hf, vllm), its encoding being `tokens` long."""
    if request.continuation is None:
        return tokens + request.budget
    return tokens - 1 if backend == "hf" else tokens + 1


@dataclass
class Context:
    """The requests of one model host (its backend's benchmarks), the job's `--context-tokens` (`given`, None: not
    given) and the plan's longest prompt + budget of these benchmarks (`planned`: `context_tokens` in
    --benchmarks-json, layerswap/workflow/batch_fit.py; None in the toy world). The plan's figure is a floor of vLLM's
    context, never a cut: where the requests the job builds are longer (the plan estimated lengths from factors, not
    from `layerswap token-counts`), the longest is taken and said; only `--context-tokens` and the model's own limit
    refuse a request."""

    backend: str
    requests: list[Request]
    given: int | None = None
    planned: int | None = None
    _contexts: dict = field(default_factory=dict)  # architecture (hosts.arch_key: config, tokenizer) -> context

    def of_model(self, model_dir) -> int:
        """The host's context for a model (once per architecture): `hf_context` with lm-eval's max_length of the model
        (its `resolve_max_length` of the model's config, as HFLM resolves it), or `vllm_context` with its
        max_position_embeddings; the tokens counted with the model's tokenizer. Refuses a request that does not fit."""
        from transformers import AutoConfig, AutoTokenizer

        from layerswap.evaluation.hosts import arch_key
        from layerswap.evaluation.vllm_weights import max_positions

        key = arch_key(Path(model_dir))
        if key not in self._contexts:
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            needs = self.needs(tokenizer)
            if self.backend == "hf":
                from lm_eval.models.huggingface import HFLM
                from lm_eval.models.utils import resolve_max_length

                config = AutoConfig.from_pretrained(str(model_dir))
                length = resolve_max_length(config, tokenizer, default=HFLM._DEFAULT_MAX_LENGTH)
                self._contexts[key] = self.hf_context(needs, length)
            else:
                self._contexts[key] = self.vllm_context(needs, max_positions(model_dir))
        return self._contexts[key]

    def needs(self, tokenizer) -> list[int]:
        """Each request's need with this tokenizer."""
        t0 = time.perf_counter()
        needs = [need(r, n, self.backend) for r, n in zip(self.requests, token_counts(self.requests, tokenizer))]
        log.info(
            "evaluate: context: %d %s requests counted in %.1f s; the longest needs %d tokens",
            len(needs),
            self.backend,
            time.perf_counter() - t0,
            max(needs, default=0),
        )
        return needs

    def hf_context(self, needs: list[int], model_length: int) -> int:
        """HFLM's context: the model's (`model_length`, lm-eval's max_length), or `--context-tokens` where smaller;
        refuses a request that does not fit."""
        context, why = model_length, "the model's context (lm-eval's max_length)"
        if self.given is not None and self.given < model_length:
            context, why = self.given, "--context-tokens"
        self.refuse_over(needs, context, why)
        return context

    def vllm_context(self, needs: list[int], max_positions: int | None) -> int:
        """vLLM's max_model_len: `--context-tokens` where given, else the longest need of the requests; at most the
        model's `max_positions` (max_position_embeddings); refuses a request that does not fit."""
        longest = max(needs, default=1)
        if self.given is not None:
            context, why = self.given, "--context-tokens"
        elif self.planned is not None and self.planned >= longest:
            context, why = self.planned, "the plan's context_tokens"
        else:
            context, why = longest, "the requests' longest"
            if self.planned is not None:
                log.info(
                    "evaluate: context: the longest request needs %d tokens, more than the plan's %d (lengths from "
                    "factors? `layerswap token-counts` counts them): vLLM's context is %d",
                    longest,
                    self.planned,
                    longest,
                )
        if max_positions is not None and context > max_positions:
            context, why = max_positions, "the model's max_position_embeddings"
        self.refuse_over(needs, context, why)
        return context

    def refuse_over(self, needs: list[int], context: int, why: str) -> None:
        """One line naming the longest request over `context` (benchmark, language key, item, lengths), if any."""
        over = [i for i, n in enumerate(needs) if n > context]
        if not over:
            return
        i = max(over, key=lambda j: needs[j])
        r = self.requests[i]
        if r.continuation is None:
            what = f"prompt {needs[i] - r.budget} + generation budget {r.budget} = {needs[i]} tokens"
        else:
            what = f"context + answer choice: {needs[i]} tokens as the {self.backend} backend feeds them"
        raise UserError(
            f"{r.benchmark} {r.key} item {r.doc_id}: {what}, over the context of {context} "
            f"tokens ({why}); lm-eval would cut the prompt from the left, so it is refused ({len(over)} of "
            f"{len(needs)} {self.backend} requests over): fewer shots or a smaller max_new_tokens "
            f"(evaluation.tasks.{r.benchmark}), or a larger context"
        )
