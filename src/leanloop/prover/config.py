"""``ProverConfig``: every budget and setting of proof search, whole-proof mode and evaluation in
one configuration, LeanDojo-v2's field names included, loadable from YAML or JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.configfile import CONFIG, ConfigBase
from leanloop.lean.sandbox import SandboxConfig
from leanloop.ml.loading import DtypeName, Quantization

if TYPE_CHECKING:
    from leanloop.lean.axioms import AxiomPolicy


class ProofMode(StrEnum):
    """How a prover proves: ``search`` tactic by tactic through a Lean server, or ``whole``
    proofs written at once by a model and each checked by Lean."""

    SEARCH = "search"
    WHOLE = "whole"


@dataclass(config=CONFIG)
class SoundnessPolicy(ConfigBase):
    """What a proof may depend on to count as proved: the one declaration of the soundness
    policy, whose fields every configuration that judges proofs (``ProverConfig``,
    ``BenchmarkConfig``, a ``ProofJob``) takes from here."""

    allow_native: bool = Field(
        default=False,
        description="Accept proofs that trust compiled code (native_decide, decide +native, "
        "bv_decide: the axioms Lean.ofReduceBool, Lean.trustCompiler and the per-use "
        "*._native.* axioms). Off: such proofs are refused by the axiom audit.",
    )
    allowed_axioms: tuple[str, ...] = Field(
        default=("propext", "Classical.choice", "Quot.sound"),
        description="The axioms a proof may depend on (Lean's #print axioms, read as a set). "
        "sorryAx is refused whatever this says.",
    )

    @property
    def policy_tag(self) -> str:
        """The axiom policy in a default run name ('' for the standard one), so that a rerun
        under another policy does not skip what the first one refused."""
        return self.axiom_policy.tag

    @property
    def axiom_policy(self) -> AxiomPolicy:
        """The axiom audit every proof passes before it counts as proved."""
        from leanloop.lean.axioms import AxiomPolicy

        return AxiomPolicy(allowed=frozenset(self.allowed_axioms), allow_native=self.allow_native)

    def with_policy(self, policy: SoundnessPolicy) -> Self:
        """This configuration under ``policy``'s soundness policy.

        Args:
            policy: Where the policy comes from (e.g. a ``ProofJob``).

        Returns:
            A copy with ``policy``'s ``allowed_axioms`` and ``allow_native``.
        """
        return dataclasses.replace(
            self, allowed_axioms=policy.allowed_axioms, allow_native=policy.allow_native
        )


@dataclass(config=CONFIG)
class ProverConfig(SoundnessPolicy):
    """How provers search. The first seven fields are LeanDojo-v2's ``ProverConfig`` (there no
    prover read them; here every one is used or explained); the rest are leanloop's.

    ``ProverConfig.from_yaml("prover.yaml")`` reads a file of these fields, or the file
    LeanDojo-v2's ``save_configs_to_file`` writes (its ``prover:`` part; ``training:`` is the
    trainers').
    """

    use_vllm: bool = Field(
        default=False,
        description="LeanDojo-v2's switch for in-process vLLM generation. leanloop talks to "
        "vLLM as an OpenAI-compatible server instead: start 'vllm serve MODEL' and use "
        "ExternalProver(MODEL, base_url=...); True is refused with that hint.",
    )
    num_workers: int = Field(
        default=1, ge=1, description="Theorems proved at once by evaluate(), one Ray worker each."
    )
    timeout: float = Field(
        default=600.0,
        gt=0,
        description="Wall-clock seconds the search (or whole-proof mode) may take per theorem; "
        "a proof found later does not count. Re-checking a proof found comes on top.",
    )
    max_expansions: int | None = Field(
        default=None,
        ge=1,
        description="Expansions allowed per theorem (None: no limit but the time).",
    )
    num_sampled_tactics: int = Field(
        default=64, ge=1, description="Tactics asked of the generator for each expansion (k)."
    )
    debug: bool = Field(
        default=False,
        description="Check the search tree's invariants after every expansion and log each "
        "expansion (slow: for finding problems).",
    )
    batch_size: int = Field(
        default=1,
        ge=1,
        description="Open nodes expanded together with one batched generator call (the best "
        "batch_size of the frontier; 1 is strict best-first). LeanDojo-v2's default of 12 "
        "suits a GPU.",
    )
    strategy: Literal["best_first", "depth_first"] = Field(
        default="best_first",
        description="best_first: expand the open node with the highest priority (ReProver); "
        "depth_first: expand the newest node's best child first, backtracking on dead ends.",
    )
    tactic_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds Lean may take for one request (a tactic); given to the Lean "
        "servers leanloop starts. A request that takes longer stops the server and ends the "
        "theorem with 'error'.",
    )
    max_depth: int | None = Field(
        default=None, ge=1, description="Longest proof searched for, in tactics (None: no limit)."
    )
    progress_weight: float = Field(
        default=0.0,
        ge=0,
        description="LeanProgress guidance: a node's priority is its path's log-probability "
        "minus progress_weight times the predicted steps remaining (0: no progress model).",
    )
    progress_model: str | None = Field(
        default=None,
        description="Directory of a trained progress model (ProgressTrainer's output) used "
        "when progress_weight > 0 (None: $LEANPROGRESS_MODEL).",
    )
    feedback_retries: int = Field(
        default=0,
        ge=0,
        description="When every tactic of an expansion failed, ask a generator that accepts "
        "feedback again, with the failed tactics and Lean's errors, up to this many times.",
    )
    num_attempts: int = Field(
        default=1,
        ge=1,
        description="Attempts per theorem in evaluate() (pass@k), each its own seed.",
    )
    seed: int = Field(
        default=0, description="Seed of sampling generators (attempt i uses seed + i)."
    )
    num_whole_proofs: int = Field(
        default=8, ge=1, description="Candidate proofs generated and checked in whole-proof mode."
    )
    recheck: bool = Field(
        default=True,
        description="Replay a proof found by search from a fresh start of the proof on the "
        "same server before reporting it.",
    )
    server_uses: int = Field(
        default=100,
        ge=1,
        description="Theorems a worker proves with one Lean server before a new one.",
    )
    num_gpus: float = Field(default=0.0, ge=0, description="GPUs reserved for each Ray worker.")
    lean_backend: str = Field(
        default="repl",
        description="The Lean backend leanloop starts to prove and check: repl (the Lean "
        "REPL) or pantograph (Pantograph; see leanloop.lean.backends for what it lacks).",
    )
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig,
        description="The sandbox of the Lean processes that check proofs (no network, a "
        "read-only file system, no new processes, limits; see docs/sandbox.md). On by "
        "default; 'enabled: false' (or LEANLOOP_SANDBOX=off) turns it off, 'subprocesses: "
        "true' lets bv_decide run its SAT solver.",
    )
    quantization: Quantization | None = Field(
        default=None,
        description="HFProver and RetrievalProver: load the generator's weights in 4 or 8 bits "
        "with bitsandbytes (a CUDA GPU); None: as stored.",
    )
    attn_implementation: str | None = Field(
        default=None,
        description="HFProver and RetrievalProver: the generator's attention kernel (sdpa, "
        "eager, flash_attention_2, ...); None: transformers' default.",
    )
    device_map: str | dict[str, int | str] | None = Field(
        default=None,
        description="HFProver and RetrievalProver: where the generator's layers go, passed to "
        "from_pretrained (auto, {'': 0}); None: the whole model on the prover's device.",
    )
    dtype: DtypeName | None = Field(
        default=None,
        description="HFProver and RetrievalProver: the dtype the generator loads in (None: "
        "bf16 on a GPU that has it, else float32).",
    )

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> ProverConfig:
        """A configuration from a mapping of its fields, or of LeanDojo-v2's file of both
        configurations (its ``prover:`` part is read).

        Args:
            data: The mapping (None for every default).
            source: What errors name as the values' origin.

        Returns:
            The configuration.
        """
        both = isinstance(data, Mapping) and set(data) <= {"prover", "training"}
        if both and isinstance(data.get("prover"), Mapping):  # LeanDojo-v2's file of both
            data = data["prover"]
        return super().from_dict(data, source)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ProverConfig:
        from leanloop.lean.backends import lean_backend

        try:
            lean_backend(self.lean_backend)
        except ValueError as exc:
            raise self.invalid(info, f"lean_backend: {exc}") from None
        if self.use_vllm:
            raise self.invalid(
                info,
                "use_vllm: leanloop does not run vLLM in-process",
                hint="start 'vllm serve MODEL' and use ExternalProver(MODEL, "
                "base_url='http://HOST:PORT/v1') (--generator external:MODEL --base-url ...)",
            )
        if self.progress_model is not None and self.progress_weight == 0:
            raise self.invalid(
                info,
                "progress_model is set but progress_weight is 0, so it would not be used",
                hint="set progress_weight > 0 (e.g. 0.5) or leave progress_model out",
            )
        if self.strategy == "depth_first" and self.batch_size > 1:
            raise self.invalid(
                info,
                "depth_first expands one node at a time: batch_size must be 1",
                hint="use strategy: best_first for batched expansions",
            )
        return self
