"""The figures a design doc states, each linked to its sentence, with the fleet-config
key it fits: the doc-figure finder.

A figure is a number with a unit (QPS, tokens, seconds and milliseconds, GPUs and
units, GB, GB/s and TB/s, a share such as "half"), a parallelism (``TP4``, "tensor
parallelism 4"), or a name the catalog knows (a GPU, a model shape, a trace, a dispatch
policy, a data type). Units are read and converted by ``pint`` (8 ms is 0.008 s, the
unit ``slo.tpot_s`` takes), never by hand. Which key a figure fits is read from the
words of its sentence (a token count near "batch" is ``dispatcher.max_batch_tokens``,
near "step" ``worker.max_batched_tokens``); with a fleet config at hand, model-level
keys name its models.

The same key stated twice with different values is a question for the author:
``conflicts`` turns it into a suggested finding to clarify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pint

from emulator.scenario.hardware import GPUS, MODEL_SHAPES

__all__ = ["DocFigure", "conflicts", "find_figures"]

WORD_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "twelve": 12, "sixteen": 16, "twenty": 20, "thirty": 30, "sixty": 60, "hundred": 100,
}
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s?[kKmM](?![a-zA-Z]))?"
_WORD = r"(?:" + "|".join(WORD_NUMBERS) + r")"
#: (pattern of the unit, its pint spelling)
_UNITS: list[tuple[str, str]] = [
    (r"QPS|requests? (?:per|a|/) ?s(?:econd)?|req/s|rps", "request / second"),
    (r"TB/s", "terabyte / second"),
    (r"GB/s", "gigabyte / second"),
    (r"(?:input |prompt |output )?tokens?", "token"),
    (r"milliseconds?|ms", "millisecond"),
    (r"seconds?|s(?![a-zA-Z])", "second"),
    (r"minutes?|min", "minute"),
    (r"TB", "terabyte"),
    (r"GB", "gigabyte"),
    (r"(?:GPU )?hosts?", "host"),
    (r"(?:(?:H100|H200|A100|B200|L40S|MI300X)(?: SXM)? )?GPUs?(?: units?)?|units?", "gpu"),
    (r"replicas?|workers?", "worker"),
    (r"sequences?", "sequence"),
    (r"%|percent", "percent"),
]
_QUANTITY = re.compile(
    r"(?<![\w.])(?P<num>" + _NUM + r"|" + _WORD + r")\s?(?:-\s?)?(?P<unit>" + "|".join(f"(?:{u})" for u, _ in _UNITS)
    + r")(?![\w])", re.IGNORECASE)
_TIMES = re.compile(r"(?<![\w.])(?P<num>" + _NUM + r"|" + _WORD + r")(?:x| times)(?= (?:the|its|speed|faster))",
                    re.IGNORECASE)
_TP = re.compile(r"\bTP ?(?P<n>\d+)\b|tensor\s+parallelism\s+(?:of\s+)?(?P<m>\d+)", re.IGNORECASE)
_HALF = re.compile(r"\b(half|a quarter|three quarters)\b\s+of\s+(?:each\s+|the\s+)?GPU'?s?\s+memory", re.IGNORECASE)
_SHARES = {"half": 0.5, "a quarter": 0.25, "three quarters": 0.75}
_DTYPE = re.compile(r"\b(BF16|FP16|FP8|INT8)\b")
_DTYPE_BYTES = {"BF16": 2, "FP16": 2, "FP8": 1, "INT8": 1}
_POLICIES = [
    (re.compile(r"round[- ]robin|next\s+(?:replica|worker)\s+in\s+turn", re.IGNORECASE), "round_robin"),
    (re.compile(r"least[- ]loaded|least outstanding", re.IGNORECASE), "least_loaded"),
    (re.compile(r"\bpull(?:s|-based)?\b|idle workers? (?:take|pull)", re.IGNORECASE), "pull"),
    (re.compile(r"prefix[- ]aware|cache[- ]aware", re.IGNORECASE), "prefix_aware"),
]
_TRACES = [(re.compile(r"Azure\s+LLM\s+inference\s+(?:trace|dataset)\s+2023|conversation\s+trace\s+of\s+the\s+Azure",
                       re.IGNORECASE),
            "azure-conv-2023")]


@dataclass(frozen=True)
class DocFigure:
    """A figure the doc states: its words, value (in the key's unit), the key it fits
    and where it sits."""

    text: str  # the words, as in the doc
    value: Any  # in the unit the key takes (s, QPS, tokens, GB, a name)
    unit: str  # the doc's unit, as pint spells it ("" for names)
    key: str | None  # the config key it fits best (None: no key fits)
    sentence: str
    start: int  # offsets of ``text`` in the doc
    end: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@lru_cache(maxsize=1)
def _registry() -> Any:
    ureg: Any = pint.UnitRegistry()
    for unit in ("request", "token", "gpu", "host", "worker", "sequence"):
        ureg.define(f"{unit} = [{unit}]")
    return ureg


def _number(text: str) -> float:
    word = text.lower()
    if word in WORD_NUMBERS:
        return float(WORD_NUMBERS[word])
    scale = 1.0
    if word[-1:] in "km":
        scale = 1_000.0 if word[-1] == "k" else 1_000_000.0
        word = word[:-1].strip()
    return float(word.replace(",", "")) * scale


def _sentences(text: str) -> list[tuple[int, int]]:
    """Spans of the doc's sentences: blocks are split at blank lines, headings and list
    items (a wrapped line stays in its sentence), then at a full stop, question or
    exclamation mark followed by a space."""
    spans = []
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.|#+)\s)", text)
    at = 0
    for block in blocks:
        at = text.index(block, at)
        for part in re.finditer(r"\S(?:.*?)(?:[.!?](?=\s|$)|$)", block, re.DOTALL):
            piece = part.group()
            lead = len(piece) - len(re.sub(r"^(?:[-*+]|\d+\.|#+)\s+", "", piece))
            spans.append((at + part.start() + lead, at + part.end()))
        at += len(block)
    return spans


def _clause(sentence: str, start: int, end: int) -> str:
    """The clause around a match: from the last , ; : before it to the next after it."""
    left = max(sentence.rfind(c, 0, start) for c in ",;:")
    rights = [i for c in ",;:" if (i := sentence.find(c, end)) >= 0]
    return sentence[left + 1:min(rights) if rights else len(sentence)]


def _model(sentence: str, models: list[str]) -> str:
    low = sentence.lower()
    named = [m for m in models if re.search(rf"\b{re.escape(m.lower())}\b", low)]
    if len(named) == 1:
        return named[0]
    # Several models and none named: the figure is every model's (the caller splits it).
    return models[0] if len(models) == 1 else (named[0] if named else "MODEL")


def _key(unit: str, sentence: str, models: list[str], host_group: int) -> str | None:
    s = sentence.lower()
    m = _model(sentence, models)
    if unit == "request / second":
        if "peak" in s:
            return "traffic.peak_qps"
        return "traffic.qps"
    if unit == "token":
        if "batch" in s and "step" not in s:
            return "dispatcher.max_batch_tokens"
        if "step" in s or "schedul" in s:
            return "worker.max_batched_tokens"
        if "kv" in s or "cache" in s:
            return "worker.kv_cache_tokens"
        if any(w in s for w in ("answer", "output", "response", "generat")):
            return f"models.{m}.output_tokens"
        if "prefix" in s or "preamble" in s or "system prompt" in s:
            return f"models.{m}.prefixes.prefix_tokens"
        return f"models.{m}.tokens"
    if unit in ("second", "millisecond", "minute"):
        if "ttft" in s or "first token" in s:
            return "slo.ttft_s"
        if "tpot" in s or "per output token" in s or "per token" in s:
            return "slo.tpot_s"
        if "give up" in s or "timeout" in s or "time out" in s:
            return "client.timeout_s"
        if "health check" in s:
            return "dispatcher.health_check_s"
        if "failover" in s or "take over" in s or "standby" in s:
            return "dispatcher.failover_s"
        if "batch" in s and ("close" in s or "wait" in s):
            return "dispatcher.close_after_s"
        if "batch" in s or "process" in s:
            return "worker.batch_s"
        if "warm" in s or "load" in s and "weights" in s:
            return "autoscaler.warmup_s"
        return None
    if unit == "gpu":
        if "host" in s and any(w in s for w in ("each have", "has", "hosts with", "of 10", "each with")):
            return f"hosts[{host_group}].units"
        return f"models.{m}.worker_units"
    if unit == "host":
        # "when one host fails" is a failure, not a count of hosts.
        if any(w in s for w in ("fail", "lost", "loss", "down", "dies")):
            return None
        return f"hosts[{host_group}].count"
    if unit == "sequence":
        return "worker.max_num_seqs"
    if unit == "gigabyte":
        return "hardware.memory_gb" if "gpu" in s or "each" in s else None
    if unit == "terabyte / second":
        return "hardware.hbm_tb_s"
    if unit == "gigabyte / second":
        return f"models.{m}.disaggregated.kv_transfer_gb_s"
    return None


#: The unit each key's value is given in.
_KEY_UNITS = {"s": "second", "qps": "request / second", "gb": "gigabyte", "tb_s": "terabyte / second",
              "gb_s": "gigabyte / second"}


def _in_key_unit(value: float, unit: str, key: str | None) -> float:
    if key is None:
        return value
    ureg = _registry()
    suffix = key.rsplit(".", 1)[-1]
    for tail, target in _KEY_UNITS.items():
        if suffix.endswith("_" + tail) or suffix == tail:
            try:
                return float(ureg.Quantity(value, unit).to(target).magnitude)
            except Exception:  # noqa: BLE001 - pint's DimensionalityError: not this key's kind
                return value
    return value


def find_figures(text: str, scenario: Any = None) -> list[DocFigure]:
    """Every figure ``text`` states, in order, each with the key it fits.

    ``scenario`` (an ``emulator.scenario.Scenario``, optional) gives the model names
    the model-level keys take."""
    models = list(getattr(scenario, "models", {}) or {})
    out: list[DocFigure] = []
    for start, end in _sentences(text):
        out.extend(_in_sentence(text, start, end, models))
    return _dedupe(out)


def _in_sentence(text: str, start: int, end: int, models: list[str]) -> list[DocFigure]:
    """The figures of the sentence at ``text[start:end]``, in order."""

    sentence = text[start:end]
    group = 0
    found: list[DocFigure] = []
    def add(match_start: int, match_end: int, value: Any, unit: str, key: str | None) -> None:
        found.append(DocFigure(sentence[match_start:match_end], value, unit, key, " ".join(sentence.split()),
                               start + match_start, start + match_end))

    for mt in _QUANTITY.finditer(sentence):
        unit = next(p for u, p in _UNITS if re.fullmatch(u, mt.group("unit"), re.IGNORECASE))
        value = _number(mt.group("num"))
        if unit == "percent":
            unit, value = "", value / 100
        # The words of its own clause decide first ("prompts ... 1,150 tokens, and
        # answers ... 210 tokens"), then the whole sentence.
        clause = _clause(sentence, mt.start(), mt.end())
        keys = [_key(unit, clause, models, group) or _key(unit, sentence, models, group)]
        if keys[0] and ".MODEL." in keys[0] and models:
            keys = [keys[0].replace(".MODEL.", f".{m}.") for m in models]
        for key in keys:
            add(mt.start(), mt.end(), _in_key_unit(value, unit, key), unit, key)
    for mt in _TIMES.finditer(sentence):
        key = "traffic.trace_speedup" if "trace" in sentence.lower() or "speed" in sentence.lower() else None
        add(mt.start(), mt.end(), _number(mt.group("num")), "", key)
    for mt in _TP.finditer(sentence):
        add(mt.start(), mt.end(), int(mt.group("n") or mt.group("m")), "gpu",
            f"models.{_model(sentence, models)}.worker_units")
    for mt in _HALF.finditer(sentence):
        add(mt.start(), mt.end(), _SHARES[mt.group(1).lower()], "", "hardware.gpu_memory_utilization")
    for mt in _DTYPE.finditer(sentence):
        add(mt.start(), mt.end(), _DTYPE_BYTES[mt.group(1)], "", f"models.{_model(sentence, models)}.arch.dtype_bytes")
    for name in GPUS:
        spelled = r"[ -]?".join(re.escape(p) for p in name.split("-"))
        short = re.escape(name.split("-")[0])
        for mt in re.finditer(rf"\b(?:{spelled}|{short}(?: SXM)?)\b", sentence):
            add(mt.start(), mt.end(), name, "", "hardware.gpu")
            break
    for name in MODEL_SHAPES:
        for mt in re.finditer(rf"\b{re.escape(name)}\b", sentence, re.IGNORECASE):
            add(mt.start(), mt.end(), name, "", f"models.{_model(sentence, models)}.arch.model")
    for pattern, policy in _POLICIES:
        for mt in pattern.finditer(sentence):
            add(mt.start(), mt.end(), policy, "", "dispatcher.policy")
            break
    for pattern, trace in _TRACES:
        for mt in pattern.finditer(sentence):
            add(mt.start(), mt.end(), trace, "", "traffic.trace")
            break
    return sorted(found, key=lambda f: f.start)


def _dedupe(figures: list[DocFigure]) -> list[DocFigure]:
    """One figure per span: a GPU name inside "4 H100 SXM GPUs" stays beside the count."""
    seen: set[tuple[int, int, str | None]] = set()
    out = []
    for f in figures:
        if (f.start, f.end, f.key) in seen:
            continue
        seen.add((f.start, f.end, f.key))
        out.append(f)
    return out


def conflicts(figures: list[DocFigure]) -> list[dict[str, Any]]:
    """Suggested findings to clarify: a key the doc states twice with different values."""
    by_key: dict[str, list[DocFigure]] = {}
    for f in figures:
        if f.key is not None:
            by_key.setdefault(f.key, []).append(f)
    out = []
    for key, found in by_key.items():
        values = list(dict.fromkeys(_shown(f.value) for f in found))
        if len(values) < 2:
            continue
        quotes = "; ".join(f"\"{f.sentence}\" ({f.text})" for f in found)
        out.append({"pass": "numbers", "severity": "clarify",
                    "title": f"The doc states {key} as {' and as '.join(values)}",
                    "body": f"The same figure appears with different values: {quotes}. Which one holds?",
                    "figures": [], "inputs": [key], "anchor_exact": found[1].sentence})
    return out


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
