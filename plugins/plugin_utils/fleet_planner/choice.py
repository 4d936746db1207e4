"""Choice: pick the split that fits, then size max_model_len and max_num_seqs on it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .candidates import Candidates
from .cuda_graphs import CAPTURE_MARGIN, gmu_leaving_room, model_runner
from .evaluation import Ctx, Evaluation, blocks_per_request, concurrency, evaluate
from .fixes import MIN_USEFUL_CONTEXT, memory_errors
from .memory import activation_peak
from .multimodal import encoder_profile, encoder_profiled, max_tokens_per_item
from .sampler import sm_count
from .settings import Notes, Settings, fmt_gib
from .weights import get_pp_indices

KV_SAFETY = 0.8  # max_num_seqs keeps 20 % of the KV cache free for longer-than-expected requests


@dataclass(slots=True)
class Search:
    """The candidates, each evaluated once at the wanted length and the initial sizing."""

    s: Settings
    cands: Candidates
    _evals: dict[tuple[int, int], Evaluation] = field(default_factory=dict)

    def ev(self, combo: tuple[int, int]) -> Evaluation:
        if combo not in self._evals:
            s = self.s
            self._evals[combo] = evaluate(s.ctx, *combo, s.gmu, s.mnbt, s.seqs, s.want_len)
        return self._evals[combo]

    def fits(self, combo: tuple[int, int], length: int) -> bool:
        e = self.ev(combo)
        return e.weights_fit and e.l_fit >= length

    def conc(self, e: Evaluation) -> float:
        return concurrency(self.s.ctx, e, self.s.mnbt, self.s.expected)


def choose(search: Search) -> tuple[Evaluation | None, bool]:
    """(the chosen evaluation, whether max_model_len must be capped to fit it), single node first."""
    s, cands = search.s, search.cands
    want, target = s.want_len, s.opts.target_concurrency
    for combo in cands.single:
        if search.fits(combo, want) and (target is None or search.conc(search.ev(combo)) >= target):
            return search.ev(combo), False
    if target is not None:
        ok = [search.ev(c) for c in cands.single if search.fits(c, want)]
        if ok:
            return max(ok, key=lambda e: (search.conc(e), -e.tp)), False
    for combo in cands.multi:
        if search.fits(combo, want):
            return search.ev(combo), False
    if s.opts.max_model_len is None:  # an explicit length is never capped
        for group in (cands.single, cands.multi):
            fits = [search.ev(c) for c in group if search.fits(c, min(want, MIN_USEFUL_CONTEXT))]
            if fits:
                return max(fits, key=lambda e: (e.l_fit, -(e.tp * e.pp))), True
    return None, False


def nothing_fits(search: Search, notes: Notes) -> Evaluation | None:
    """Explain why no candidate fits; the one with the most KV memory is reported."""
    s = search.s
    evals = [search.ev(c) for c in search.cands.single + search.cands.multi]
    notes.errors.extend(memory_errors(s, evals, s.want_len, s.mnbt, s.seqs, search.cands.tps))
    return max(evals, key=lambda e: (e.stage.mem.available_kv, -e.tp)) if evals else None


def round_len(n: int) -> int:
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return n


def pick_seqs(ctx: Ctx, e: Evaluation, mnbt: int, expected: int, cap: int, target: int | None) -> int:
    if target is not None:
        return max(1, target)
    bpr = blocks_per_request(ctx, e, mnbt, max(expected, 1))
    fit = int(KV_SAFETY * e.num_blocks / bpr) if bpr else cap
    seqs = max(1, min(cap, fit))
    if seqs >= 16:
        seqs = seqs // 8 * 8
    return seqs


@dataclass(frozen=True, slots=True)
class Sizing:
    feasible: bool
    ev: Evaluation
    max_len: int
    seqs: int
    mnbt: int


def _capped_len(s: Settings, chosen: Evaluation, notes: Notes) -> int:
    max_len = round_len(chosen.l_fit)
    if s.opts.target_context_len is not None:
        src = "target_context_len"
    else:
        src = f"the model's maximum ({s.len_key}={s.ctx.derived_len})"
    notes.warnings.append(
        f"max_model_len capped at {max_len} (KV cache holds at most {chosen.l_fit} tokens for one "
        f"request); {src} was {s.want_len}. Raise it with tensor_parallel_size, kv_cache_dtype fp8 "
        "or more GPUs"
    )
    return max_len


def _sequences(s: Settings, chosen: Evaluation, expected: int) -> tuple[int, int]:
    """(max_num_seqs from the KV capacity at the expected request length, max_num_batched_tokens)."""
    user_seqs, user_mnbt = s.opts.max_num_seqs, s.opts.max_num_batched_tokens
    if user_seqs:
        seqs = user_seqs
    else:
        seqs = pick_seqs(s.ctx, chosen, s.mnbt, expected, s.class_seqs, s.opts.target_concurrency)
        if user_mnbt:
            seqs = min(seqs, user_mnbt)  # vLLM requires max_num_batched_tokens >= max_num_seqs
    return seqs, s.mnbt if user_mnbt else max(s.mnbt, seqs)


def size(search: Search, chosen: Evaluation, capped: bool, notes: Notes) -> Sizing:
    """Final max_model_len and max_num_seqs on the chosen split; infeasible if the length cannot shrink."""
    s = search.s
    tp, pp = chosen.tp, chosen.pp
    if pp > 1 and s.opts.pipeline_parallel_size is not None:
        one = evaluate(s.ctx, 1, 1, s.gmu, s.mnbt, s.seqs, s.want_len) if 1 in search.cands.tps else None
        if one is not None and one.weights_fit and one.l_fit >= s.want_len:
            notes.warnings.append(
                f"pipeline_parallel_size {pp} as set, though {s.name} fits one GPU at max_model_len "
                f"{s.want_len}; unset pipeline_parallel_size unless the stages are wanted"
            )
    elif pp > 1:
        notes.warnings.append(
            f"one node cannot hold {s.name} at max_model_len {s.want_len}: pipeline_parallel_size {pp} "
            f"across {pp} nodes (tensor_parallel_size {tp} within each)"
        )
    max_len = _capped_len(s, chosen, notes) if capped else s.want_len
    expected = min(s.expected, max_len)
    seqs, mnbt = _sequences(s, chosen, expected)
    final = evaluate(s.ctx, tp, pp, s.gmu, mnbt, seqs, max_len)
    if final.l_fit < max_len:
        too_small = not final.weights_fit or final.l_fit < min(max_len, MIN_USEFUL_CONTEXT)
        if s.opts.max_model_len is not None or too_small:
            target_seqs = s.opts.target_concurrency is not None and not s.opts.max_num_seqs
            seq_var = "target_concurrency" if target_seqs else "max_num_seqs"
            notes.errors.extend(
                memory_errors(s, [final], max_len, mnbt, seqs, search.cands.tps, seq_var=seq_var)
            )
            return Sizing(False, final, max_len, seqs, mnbt)
        max_len = round_len(final.l_fit)
        final = evaluate(s.ctx, tp, pp, s.gmu, mnbt, seqs, max_len)
    _warn(s, final, mnbt, seqs, expected, notes)
    return Sizing(True, final, max_len, seqs, mnbt)


def _warn(s: Settings, final: Evaluation, mnbt: int, seqs: int, expected: int, notes: Notes) -> None:
    """Warnings about the feasible plan: queueing, CUDA-graph headroom, encoder estimates."""
    ctx, target = s.ctx, s.opts.target_concurrency
    conc_expected = concurrency(ctx, final, mnbt, expected)
    if target is not None and conc_expected < target:
        notes.warnings.append(
            f"target_concurrency {target} at {expected} tokens exceeds the KV cache "
            f"({conc_expected:.1f} requests fit): requests will queue or be preempted; add GPUs, "
            "set kv_cache_dtype fp8 or lower target_context_len"
        )
    mem = final.stage.mem
    if mem.graph_headroom < CAPTURE_MARGIN and not ctx.enforce_eager and not ctx.vinfo.extensible:
        unreserved = max(mem.cuda_graphs - mem.cuda_graphs_reserved, 0)
        runner = model_runner(ctx.arch, ctx.vinfo, ctx.quant).upper()
        gmu = s.gmu if s.gmu is not None else ctx.vinfo.gmu_default
        notes.warnings.append(
            f"gpu_memory_utilization {gmu:g} leaves {fmt_gib(max(mem.graph_headroom + unreserved, 0))} GiB "
            f"outside the budget for the ~{fmt_gib(unreserved)} GiB of CUDA graphs that vLLM "
            f"{ctx.vinfo.text}'s {runner} model runner does not reserve inside it: the server may run out "
            "of memory after a clean start (graph capture or the first large batch); lower "
            f"gpu_memory_utilization to {gmu_leaving_room(mem, ctx.vinfo, ctx.gpu.used_bytes):.2f} or set "
            "enforce_eager"
        )
    if ctx.arch.is_multimodal and ctx.towers:
        line = _multimodal_warning(s, final, mnbt, seqs)
        if line:
            notes.warnings.append(line)


def _multimodal_warning(s: Settings, final: Evaluation, mnbt: int, seqs: int) -> str | None:
    """What the profile does with the encoder: the pass it sizes, or (V2 runner before 0.27) none."""
    ctx = s.ctx
    version = ctx.vinfo.version
    modality, tokens, items = encoder_profile(
        ctx.arch, mnbt, seqs, ctx.derived_len, dict(ctx.mm_limits), version
    )
    if not max_tokens_per_item(ctx.arch, ctx.derived_len, version):
        return (
            "multimodal model: the encoder profiling pass is estimated; lower --limit-mm-per-prompt "
            "or set language_model_only if images are not needed"
        )
    if not tokens:
        return None  # limit_mm_per_prompt turns every modality off: no encoder pass
    runner = model_runner(ctx.arch, ctx.vinfo, ctx.quant)
    what = f"{items} {modality} item{'s' if items > 1 else ''} of {tokens} tokens"
    if encoder_profiled(runner, ctx.vinfo.version):
        return (
            f"multimodal model: vLLM profiles the vision encoder with {what} (its largest per "
            "item); set limit_mm_per_prompt to 0 for the modalities not served, or language_model_only if "
            "images are not needed"
        )
    mem = final.stages[0].mem  # the encoder runs on the first pipeline stage
    _start, end = get_pp_indices(ctx.arch.num_layers, 0, final.pp)
    seen = activation_peak(
        ctx.arch,
        mnbt,
        seqs,
        final.tp,
        ctx.d,
        final.pp == 1,
        ctx.vinfo,
        ctx.arch.layer_kinds[:end],
        ctx.arch.layer_mlp[:end],
        True,
        True,
        ctx.derived_len,
        dict(ctx.mm_limits),
        num_sms=sm_count(ctx.gpu.name),
        cc=ctx.gpu.cc,
        quant=ctx.quant,
        spec_tokens=ctx.spec_tokens,
        draft_slots=ctx.draft_slots,
    )
    extra = max(seen - mem.activation, 0)
    gmu = math.floor((mem.requested - extra) / mem.total * 100) / 100
    return (
        f"vLLM {ctx.vinfo.text}'s V2 model runner does not profile the vision encoder: the "
        f"~{fmt_gib(extra)} GiB that {what} take at runtime are left to the KV cache, so the first large "
        f"image batch may run out of memory; lower gpu_memory_utilization to {gmu:.2f}, set "
        "limit_mm_per_prompt, or language_model_only if images are not needed"
    )
