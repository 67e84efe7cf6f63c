"""A deployment's parallelism as serving frameworks state it (TensorRT-LLM's Mapping, aiconfigurator):
attention tensor parallelism `tp`, attention data parallelism `attention_dp` (that many attention
replicas, each with its own batch and KV cache), the MoE layers' split of the same GPUs into MoE tensor
parallelism `moe_tp` x expert parallelism `ep`, and pipeline stages `pp`:

    GPUs = tp x attention_dp x pp        moe_tp x ep = tp x attention_dp  (the MoE group)

`Parallelism(...)` is a frozen value: `moe_tp` / `ep` left None are filled from the other (ep 1 when
neither is given: the MoE split like the attention, MoE-TP = the group), and an inconsistent set is a
ParallelError (a UserError: one `error:` line). `from_flags` is the command line's reading, which adds
one inference: `--expert-parallel N` alone (no --tp, no --attention-dp) is the standard wide-EP
deployment, attention DP N (every GPU its own tokens, the experts spread by the all-to-all).

How each split becomes one GPU's graph: attention TP by passes/shard_tp.py (MLA by heads, the latent
replicated); the MoE by models.decoder_config.deploy_moe (experts per GPU, the all-to-all of EP under
attention DP, the all-gather / reduce-scatter of MoE-TP under attention DP) and passes/shard_moe.py
(MoE-TP under attention TP, one all-reduce); each collective priced by estimator/pricing/collectives.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.errors import UserError


class ParallelError(UserError):
    pass


def _positive(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ParallelError(f"{name} {value!r}: must be a positive integer")


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    attention_dp: int = 1
    moe_tp: int | None = None
    ep: int | None = None
    pp: int = 1

    def __post_init__(self) -> None:
        for name, value in (("--tp", self.tp), ("--attention-dp", self.attention_dp),
                            ("--moe-tp", self.moe_tp), ("--expert-parallel", self.ep), ("--pp", self.pp)):
            _positive(name, value)
        group = self.moe_group
        ep, moe_tp = self.ep, self.moe_tp
        if ep is None and moe_tp is None:
            ep, moe_tp = 1, group
        elif ep is None:
            if group % moe_tp:
                raise ParallelError(f"--moe-tp {moe_tp} does not divide tp x attention-dp = {group}")
            ep = group // moe_tp
        elif moe_tp is None:
            if group % ep:
                raise ParallelError(f"--expert-parallel {ep} does not divide tp x attention-dp = {group} "
                                    f"(moe-tp x expert-parallel = tp x attention-dp)")
            moe_tp = group // ep
        if moe_tp * ep != group:
            raise ParallelError(f"moe-tp {moe_tp} x expert-parallel {ep} = {moe_tp * ep}, but it must equal "
                                f"tp {self.tp} x attention-dp {self.attention_dp} = {group}")
        object.__setattr__(self, "ep", ep)
        object.__setattr__(self, "moe_tp", moe_tp)

    @classmethod
    def from_flags(cls, tp: int | None = None, attention_dp: int | None = None, moe_tp: int | None = None,
                   ep: int | None = None, pp: int | None = None) -> Parallelism:
        """The command line's flags (None: not given); `--expert-parallel N` alone means attention DP N."""
        if attention_dp is None:
            attention_dp = ep if (ep and tp is None and moe_tp is None) else 1
        return cls(tp or 1, attention_dp, moe_tp, ep, pp or 1)

    @property
    def moe_group(self) -> int:
        return self.tp * self.attention_dp

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp * self.pp

    @property
    def plain(self) -> bool:
        """No attention DP and no expert parallelism: attention TP (and MoE-TP = tp) alone."""
        return self.attention_dp == 1 and self.ep == 1

    def label(self) -> str:
        """e.g. "tp 8, ep 8" or "tp 1, attention-dp 8, ep 8" (the parts that are not 1; tp always)."""
        parts = [f"tp {self.tp}"]
        if self.attention_dp > 1:
            parts.append(f"attention-dp {self.attention_dp}")
        if self.ep > 1:
            parts.append(f"ep {self.ep}")
        if self.moe_tp not in (1, self.tp) or (self.ep > 1 and self.moe_tp > 1):
            parts.append(f"moe-tp {self.moe_tp}")
        if self.pp > 1:
            parts.append(f"pp {self.pp}")
        return ", ".join(parts)

    def moe(self, spec):
        """One GPU's MoeSpec (models.decoder_config.deploy_moe); ParallelError when it cannot split."""
        from models.decoder_config import deploy_moe

        if spec is None:
            return None
        try:
            return deploy_moe(spec, self.ep, self.attention_dp, self.tp)
        except ValueError as exc:
            raise ParallelError(f"{self.label()}: {exc}") from None

    def config(self, cfg):
        """A DecoderConfig with one GPU's MoE share (the attention is sharded later, by shard_tp)."""
        from dataclasses import replace

        if getattr(cfg, "moe", None) is None:
            if self.ep > 1 or self.attention_dp > 1:
                raise ParallelError("--expert-parallel needs a mixture-of-experts model")
            return cfg
        return replace(cfg, moe=self.moe(cfg.moe))

    def to_json(self) -> dict:
        return {"tp": self.tp, "attention_dp": self.attention_dp, "moe_tp": self.moe_tp, "ep": self.ep,
                "pp": self.pp, "gpus": self.gpus}
