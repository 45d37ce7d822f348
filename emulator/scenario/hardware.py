"""Accelerators and model shapes: the catalog, and the arithmetic of a model on GPUs.

A scenario names an accelerator in ``[hardware]`` and a model's shape in
``[models.NAME.arch]`` (or gives their numbers directly). From them come the KV bytes
per token, the weights' bytes, the KV capacity of a worker (``kv_cache_tokens =
"auto"``) and the coefficients of the ``roofline`` step model. Every figure is an exact
``Fraction`` (catalog values are decimal strings), so the numbers pass can show its
arithmetic; the engine takes floats of them.

Units: memory in GB of 10^9 bytes (as data sheets count), bandwidth in TB/s of 10^12
bytes a second, compute in dense BF16 TFLOPS (10^12 a second; data sheets often lead
with the figure "with sparsity", which is twice the dense one), parameters in billions,
the GPU-to-GPU link in GB/s each way and a collective's latency in microseconds.

Tensor parallelism over ``units`` GPUs costs two all-reduces a layer of the step's
tokens x hidden size x bytes per value; a ring all-reduce moves 2 (units - 1) / units of
that over each GPU's link, and each collective has a fixed latency. The catalog's link
figures are the data sheets' (NVLink, or PCIe for the PCIe parts); the latency is read
off a profile of a 4-GPU H100 all-reduce of one token's activations (9.8 ms for the 160
all-reduces of a 70B model's decode step of one sequence, 61 us each), so a part whose
collectives are not profiled is given the same figure: set ``collective_us`` to replace it.

A mixture of experts (a shape with ``experts``) keeps every expert resident but a step
reads only the experts its tokens are routed to: with routing taken as uniform, B
tokens each picking k of E routed experts hit E (1 - (1 - k / E)^B) distinct experts
on average in each MoE layer (the one figure computed in floating point, then held as a
``Fraction``), so a step reads the non-routed weights (attention, dense layers, shared
experts, embeddings) plus MoE layers x that many experts x one expert's bytes. The
compute stays 2 x active parameters per token. Expert parallelism over the worker's
GPUs (``expert_parallel``) replaces each MoE layer's MLP all-reduce by a dispatch and
a combine all-to-all, each moving tokens x k x hidden size x bytes x (EP - 1) / EP over
a GPU's link, at the collective latency; the experts are taken as spread evenly and
the load as balanced, so no GPU waits on a busier one.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "GPUS",
    "MODEL_SHAPES",
    "Accelerator",
    "ModelShape",
    "Roofline",
]

_GB = 10**9
_TB = 10**12
_BILLION = 10**9


@dataclass(frozen=True)
class Accelerator:
    """One GPU: its memory, HBM bandwidth and dense BF16 compute, and (when known) its
    link to the GPUs it shares a tensor-parallel worker with: bandwidth each way and the
    latency of one collective."""

    name: str
    memory_gb: Fraction
    hbm_tb_s: Fraction
    bf16_tflops: Fraction
    link_gb_s: Fraction | None = None
    collective_us: Fraction | None = None

    @property
    def memory_bytes(self) -> Fraction:
        """Memory in bytes."""
        return self.memory_gb * _GB

    @property
    def bytes_per_s(self) -> Fraction:
        """HBM bandwidth in bytes a second."""
        return self.hbm_tb_s * _TB

    @property
    def flops(self) -> Fraction:
        """Dense BF16 floating-point operations a second."""
        return self.bf16_tflops * _TB

    @property
    def link_bytes_per_s(self) -> Fraction | None:
        """The GPU-to-GPU link in bytes a second each way (None: not known)."""
        return None if self.link_gb_s is None else self.link_gb_s * _GB


@dataclass(frozen=True)
class ModelShape:
    """One model's shape: parameters (all, and active per token for a mixture of
    experts), layers, KV heads, head dimension and (when known) hidden size; for a
    mixture of experts, the routed experts of a MoE layer, how many a token picks, the
    shared experts every token runs, the MoE layers and one routed expert's parameters
    (in one layer). ``experts = 0``: a dense model."""

    name: str
    params_b: Fraction
    active_params_b: Fraction
    layers: int
    kv_heads: int
    head_dim: int
    hidden: int | None = None
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_layers: int = 0
    expert_params_b: Fraction = Fraction(0)

    @property
    def routed_params_b(self) -> Fraction:
        """Parameters of every routed expert of every MoE layer (0 for a dense model)."""
        return self.moe_layers * self.experts * self.expert_params_b

    def experts_hit(self, tokens: int) -> Fraction:
        """Expected distinct routed experts of one MoE layer that ``tokens`` tokens
        hit, each picking ``experts_per_token`` of them uniformly: E (1 - (1 - k/E)^B)."""
        e, k = self.experts, self.experts_per_token
        if not e or tokens <= 0:
            return Fraction(0)
        if k >= e:
            return Fraction(e)
        return Fraction(e - e * (1 - k / e) ** tokens)


#: Latency of one all-reduce of a step's activations, in microseconds (see the module
#: docstring for its source).
COLLECTIVE_US = "61.25"


def _gpu(name: str, memory_gb: str, hbm_tb_s: str, bf16_tflops: str, link_gb_s: str) -> Accelerator:
    return Accelerator(name, Fraction(memory_gb), Fraction(hbm_tb_s), Fraction(bf16_tflops),
                       Fraction(link_gb_s), Fraction(COLLECTIVE_US))


#: Vendor data-sheet figures, per GPU; compute is dense BF16 (half the "with sparsity" figure).
GPUS: dict[str, Accelerator] = {
    g.name: g
    for g in (
        # NVIDIA A100 Tensor Core GPU data sheet (SXM): 40GB HBM2, 1,555 GB/s; BF16 312 TFLOPS
        # (624 with sparsity). NVLink 3: 600 GB/s in both directions, 300 each way.
        _gpu("A100-40GB", "40", "1.555", "312", "300"),
        # Same data sheet, 80GB HBM2e SXM: 2,039 GB/s; BF16 312 TFLOPS dense.
        _gpu("A100-80GB", "80", "2.039", "312", "300"),
        # NVIDIA H100 Tensor Core GPU data sheet, H100 SXM: 80GB, 3.35 TB/s; BF16 1,979 TFLOPS
        # with sparsity, so 989.4 dense (the H100 architecture white paper's dense figure).
        # NVLink 4: 900 GB/s in both directions, 450 each way.
        _gpu("H100-SXM-80GB", "80", "3.35", "989.4", "450"),
        # NVIDIA H200 Tensor Core GPU data sheet, H200 SXM: 141GB HBM3e, 4.8 TB/s; BF16 1,979
        # TFLOPS with sparsity (the H100's silicon), 989.4 dense; NVLink 4 as the H100.
        _gpu("H200-141GB", "141", "4.8", "989.4", "450"),
        # NVIDIA DGX B200 / HGX B200 data sheets: 8 GPUs with 1,440 GB of HBM3e (180 GB each),
        # 8 TB/s each; FP16/BF16 Tensor Core 36 PFLOPS for 8 GPUs with sparsity, so 2.25
        # PFLOPS dense per GPU (B200 at 1,000 W). The launch figure was 192 GB. NVLink 5:
        # 1.8 TB/s in both directions, 900 GB/s each way.
        _gpu("B200", "180", "8", "2250", "900"),
        # NVIDIA L40S data sheet: 48GB GDDR6, 864 GB/s; BF16 Tensor Core 362.05 TFLOPS
        # (733 with sparsity). No NVLink: PCIe Gen4 x16, 64 GB/s in both directions.
        _gpu("L40S", "48", "0.864", "362.05", "32"),
        # AMD Instinct MI300X data sheet: 192 GB HBM3, 5.3 TB/s peak; peak BF16 1,307.4 TFLOPS
        # dense (2,614.9 with sparsity). Infinity Fabric: 896 GB/s peer to peer in both
        # directions, 448 each way.
        _gpu("MI300X", "192", "5.3", "1307.4", "448"),
    )
}


def _shape(name: str, params_b: str, layers: int, kv_heads: int, head_dim: int, hidden: int,
           active_params_b: str | None = None,
           moe: tuple[int, int, int, int, int] | None = None) -> ModelShape:
    """``moe``: (routed experts, picked a token, shared experts, MoE layers, one
    expert's parameters)."""
    params = Fraction(params_b)
    active = params if active_params_b is None else Fraction(active_params_b)
    if moe is None:
        return ModelShape(name, params, active, layers, kv_heads, head_dim, hidden)
    experts, k, shared, moe_layers, expert_params = moe
    return ModelShape(name, params, active, layers, kv_heads, head_dim, hidden, experts, k, shared,
                      moe_layers, Fraction(expert_params, _BILLION))


#: Shapes from each model's published config (num_hidden_layers, num_key_value_heads,
#: hidden_size / num_attention_heads, hidden_size) and its parameter count (the model card, or the
#: count of the released weights), rounded to 10 million parameters.
MODEL_SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        # meta-llama/Llama-2-7b-hf config: 32 layers, 32 heads (no GQA), hidden 4096;
        # 6.74B parameters in the released weights.
        _shape("Llama-2-7B", "6.74", 32, 32, 128, 4096),
        # meta-llama/Llama-2-70b-hf config: 80 layers, 64 heads, 8 KV heads, hidden 8192;
        # 68.98B parameters in the released weights.
        _shape("Llama-2-70B", "68.98", 80, 8, 128, 8192),
        # meta-llama/Meta-Llama-3-8B config: 32 layers, 32 heads, 8 KV heads, hidden 4096;
        # 8.03B parameters.
        _shape("Llama-3-8B", "8.03", 32, 8, 128, 4096),
        # meta-llama/Meta-Llama-3-70B config: 80 layers, 64 heads, 8 KV heads, hidden 8192;
        # 70.55B parameters.
        _shape("Llama-3-70B", "70.55", 80, 8, 128, 8192),
        # mistralai/Mixtral-8x7B-v0.1 config: 32 layers, 32 heads, 8 KV heads, hidden 4096,
        # 8 experts (num_local_experts), 2 per token (num_experts_per_tok) in every layer,
        # intermediate_size 14336, so one expert (w1, w2, w3) is 3 x 4096 x 14336
        # parameters; 46.7B parameters, 12.9B active per token (Mixtral paper).
        _shape("Mixtral-8x7B", "46.7", 32, 8, 128, 4096, active_params_b="12.9",
               moe=(8, 2, 0, 32, 3 * 4096 * 14336)),
        # deepseek-ai/DeepSeek-V3 config: 61 layers, hidden 7168; the first 3 layers dense
        # (first_k_dense_replace), the other 58 MoE layers of 256 routed experts
        # (n_routed_experts), 8 a token (num_experts_per_tok) and 1 shared expert, each of
        # moe_intermediate_size 2048, so 3 x 7168 x 2048 parameters; 671B parameters, 37B
        # active a token (DeepSeek-V3 technical report; the multi-token-prediction module
        # of the released weights is left out). Multi-head latent attention caches one
        # 512-value latent (kv_lora_rank) and a 64-value RoPE key (qk_rope_head_dim) a
        # layer a token, 576 values: the KV formula 2 x layers x KV heads x head dim
        # gives them as 1 KV head of head dim 288.
        _shape("DeepSeek-V3", "671", 61, 1, 288, 7168, active_params_b="37",
               moe=(256, 8, 1, 58, 3 * 7168 * 2048)),
        # bigscience/bloom config: 70 layers, 112 heads (no GQA), hidden 14336; 176.2B
        # parameters (the model card's 176,247,271,424).
        _shape("BLOOM-176B", "176.25", 70, 112, 128, 14336),
    )
}


@dataclass(frozen=True)
class Roofline:
    """One model on ``units`` GPUs of one kind: its bytes, and the roofline step model.

    A step lasts max(memory time, compute time) plus its fixed costs and its
    communication: memory = (weights + KV bytes read) / (units x bandwidth x mbu),
    compute = 2 x active parameters x tokens in the step / (units x FLOPs x mfu); each
    step pays ``step_overhead_s`` (launching its kernels) and, on more than one GPU, two
    all-reduces a layer: their latency, and 2 (units - 1) / units x tokens x hidden size
    x bytes per value over the link. With mbu = mfu = 1 and no overhead the memory and
    compute terms are a physical floor, not a prediction. For a mixture of experts the
    weights read depend on the step's tokens (``weights_read_at_s``), and under
    ``expert_parallel`` its MoE layers trade the MLP all-reduce for two all-to-alls
    (see the module docstring).
    """

    gpu: Accelerator
    shape: ModelShape
    units: int
    dtype_bytes: Fraction
    memory_utilization: Fraction
    mbu: Fraction = Fraction(1)
    mfu: Fraction = Fraction(1)
    step_overhead_s: Fraction = Fraction(0)
    expert_parallel: int = 1
    experts_read: str = "hit"  # "all": cost every step as reading every expert

    @property
    def moe(self) -> bool:
        """Whether the shape is a mixture of experts (the weights read vary by step)."""
        return self.shape.experts > 0

    @property
    def expert_bytes(self) -> Fraction:
        """One routed expert of one layer: its parameters x bytes per value."""
        return self.shape.expert_params_b * _BILLION * self.dtype_bytes

    def weight_bytes_read(self, tokens: int) -> Fraction:
        """Bytes of weights a step of ``tokens`` tokens reads: every weight of a dense
        model; for a mixture, the non-routed weights plus MoE layers x the experts hit
        x one expert's bytes."""
        if not self.moe or self.experts_read == "all":
            return self.weight_bytes
        s = self.shape
        rest = self.weight_bytes - s.routed_params_b * _BILLION * self.dtype_bytes
        return rest + s.moe_layers * s.experts_hit(tokens) * self.expert_bytes

    def weights_read_at_s(self, tokens: int) -> Fraction:
        """Memory time of the weights a step of ``tokens`` tokens reads, at this mbu."""
        if not self.moe:
            return self.weights_read_s
        return self.weight_bytes_read(tokens) / (self.units * self.gpu.bytes_per_s * self.mbu)

    def weights_read_table(self, most_tokens: int) -> list[float]:
        """``weights_read_at_s`` of 0 to ``most_tokens`` tokens in floats, for the engine
        to look up a step's weights term by its tokens."""
        if self.experts_read == "all":
            return [float(self.weights_read_s)] * (most_tokens + 1)
        s = self.shape
        per_s = self.units * self.gpu.bytes_per_s * self.mbu
        rest = float(self.weight_bytes_read(0) / per_s)
        layer = float(s.moe_layers * self.expert_bytes / per_s)
        e, k = s.experts, min(s.experts_per_token, s.experts)
        miss = 1 - k / e
        return [rest + layer * (e - e * miss**b) for b in range(most_tokens + 1)]

    @property
    def kv_bytes_per_token(self) -> Fraction:
        """2 (K and V) x layers x KV heads x head dim x bytes per value."""
        s = self.shape
        return 2 * s.layers * s.kv_heads * s.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> Fraction:
        """Parameters x bytes per value (all experts of a mixture are resident)."""
        return self.shape.params_b * _BILLION * self.dtype_bytes

    @property
    def usable_bytes(self) -> Fraction:
        """units x memory x gpu_memory_utilization: what the engine may take."""
        return self.units * self.gpu.memory_bytes * self.memory_utilization

    @property
    def kv_capacity_tokens(self) -> int:
        """(usable memory - weights) // KV bytes per token (0 if the weights do not fit)."""
        free = self.usable_bytes - self.weight_bytes
        return max(0, int(free // self.kv_bytes_per_token))

    @property
    def weights_read_s(self) -> Fraction:
        """Memory time of reading the weights once, at this mbu."""
        return self.weight_bytes / (self.units * self.gpu.bytes_per_s * self.mbu)

    @property
    def kv_token_read_s(self) -> Fraction:
        """Memory time of reading one token's KV, at this mbu."""
        return self.kv_bytes_per_token / (self.units * self.gpu.bytes_per_s * self.mbu)

    @property
    def token_compute_s(self) -> Fraction:
        """Compute time of one token (2 FLOPs per active parameter), at this mfu."""
        return 2 * self.shape.active_params_b * _BILLION / (self.units * self.gpu.flops * self.mfu)

    @property
    def communicates(self) -> bool:
        """Whether the steps pay tensor-parallel communication: more than one GPU, with
        the link and the hidden size known."""
        return (self.units > 1 and self.gpu.link_bytes_per_s is not None
                and self.gpu.collective_us is not None and self.shape.hidden is not None)

    @property
    def collectives(self) -> int:
        """Collectives a step: two all-reduces a layer (after attention and after the
        MLP) on more than one GPU, none on one; under expert parallelism a MoE layer's
        MLP all-reduce becomes a dispatch and a combine all-to-all (one more)."""
        if not self.communicates:
            return 0
        return 2 * self.shape.layers + (self.shape.moe_layers if self.all_to_all else 0)

    @property
    def all_to_all(self) -> bool:
        """Whether the MoE layers pay expert parallelism's all-to-alls."""
        return self.expert_parallel > 1 and self.moe and self.communicates

    @property
    def all_to_all_token_s(self) -> Fraction:
        """Link time of one token's dispatch and combine in every MoE layer: 2 x MoE
        layers x k x hidden size x bytes per value x (EP - 1) / EP over the link."""
        if not self.all_to_all:
            return Fraction(0)
        s, link = self.shape, self.gpu.link_bytes_per_s
        assert s.hidden is not None and link is not None
        ep = self.expert_parallel
        away = Fraction(ep - 1, ep)
        return 2 * s.moe_layers * s.experts_per_token * away * s.hidden * self.dtype_bytes / link

    @property
    def fixed_step_s(self) -> Fraction:
        """What every step pays whatever it holds: the launch overhead and the latency
        of its collectives."""
        latency = self.gpu.collective_us or Fraction(0)
        return self.step_overhead_s + self.collectives * latency / 10**6

    @property
    def comm_token_s(self) -> Fraction:
        """Link time of one token in a step: 2 (units - 1) / units x hidden size x bytes
        per value for each collective, over the link each way."""
        if not self.communicates:
            return Fraction(0)
        assert self.shape.hidden is not None and self.gpu.link_bytes_per_s is not None
        ring = Fraction(2 * (self.units - 1), self.units)
        all_reduces = 2 * self.shape.layers - (self.shape.moe_layers if self.all_to_all else 0)
        return (all_reduces * ring * self.shape.hidden * self.dtype_bytes / self.gpu.link_bytes_per_s
                + self.all_to_all_token_s)

    def step_s(self, kv_tokens_read: int | Fraction, tokens: int | Fraction) -> Fraction:
        """A step that reads ``kv_tokens_read`` tokens of KV and computes ``tokens`` tokens."""
        memory = self.weights_read_at_s(int(tokens)) + self.kv_token_read_s * kv_tokens_read
        return max(memory, self.token_compute_s * tokens) + self.fixed_step_s + self.comm_token_s * tokens
