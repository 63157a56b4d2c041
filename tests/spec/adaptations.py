"""The spec conformance table: how every block runs, where the spec contradicts itself or
DESIGN.md, and which of the spec's names are aliases here.

`python -m tests.spec.adaptations` rewrites `tests/spec/ADAPTATIONS.md` from this table;
a test fails when the file is out of date.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.spec.blocks import Handling
from tests.spec.table_abstractions import ABSTRACTIONS
from tests.spec.table_chapter import CHAPTER
from tests.spec.table_draft import DRAFT, EVALS
from tests.spec.table_guide_evals import GUIDE_EVALS

HANDLINGS: tuple[Handling, ...] = (*DRAFT, *EVALS, *ABSTRACTIONS, *GUIDE_EVALS, *CHAPTER)
"""One entry per fenced block of the spec."""

DOCUMENT = Path(__file__).with_name("ADAPTATIONS.md")


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A place where the spec disagrees with itself or with DESIGN.md section 3."""

    where: str
    """The documents (and blocks) involved."""
    what: str
    """What disagrees."""
    here: str
    """What this project does, and why."""


CONTRADICTIONS: tuple[Contradiction, ...] = (
    Contradiction(
        "EVALS.md (EvalResult: `latency_ms: int`) vs guide-evaluation-chapter.md (class diagram: "
        "`latency_ms: float`)",
        "the type of a result's latency",
        "`int` (whole milliseconds, rounded), as the normative EVALS.md and the draft write it; "
        "DESIGN.md says nothing otherwise. Sub-millisecond timings are the benchmarks' business.",
    ),
    Contradiction(
        "guide-evaluation-chapter.md#20 (`report.failed_samples` is 'Count of failing samples' "
        "and `report.failed_samples()` a filter); its class diagram lists both",
        "one name used as a count and as a method",
        "`failed_samples()` / `passed_samples()` are methods (as EVALS.md's table has them); the "
        "counts are `failed_count`, `passed_count` and `total_samples`.",
    ),
    Contradiction(
        "EVALS.md (`EvalRequest.experiment` is required) vs guide-evaluation-chapter.md#28 "
        "(`EvalRequest(sample=sample)`)",
        "whether a request needs an experiment",
        "required, as EVALS.md says; `submit_dataset(dataset, requests)` without an experiment "
        "submits under `BASELINE`. The guide's loop over an empty `eval_samples` never builds one.",
    ),
    Contradiction(
        "EVALS-mainloop-draft.md (errored samples: `Score(0, passed=False)` counted in the mean; "
        "`Score.reason = str(e)`) vs DESIGN.md section 3",
        "what an error does to the rates, and the error text",
        "DESIGN.md wins: `pass_rate = passed / total`, errors count as not passed, "
        "`error_rate` beside it. A result's `error` is the exception's message as the draft's "
        "`str(e)` and EVALS.md show it (the type name when there is no message); the stage "
        "is `error_kind`; the exception's type and traceback go to the log and the debug "
        "bundle.",
    ),
    Contradiction(
        "EVALS-mainloop-draft.md#7 (`JudgeOutput(score, passed, reason)`, "
        "`adapter.evaluate(prompt)`) vs EVALS.md (rating labels) and DESIGN.md 4.1",
        "what the judge answers, and whether an adapter call needs a session",
        "EVALS.md wins: the judge answers `justification` and a `rating` label; `score`, "
        "`passed` and `reason` are read-only views of them. `evaluate(prompt, *, session)` "
        "needs a session (DESIGN.md 4.1); `llm_judge` makes one per call.",
    ),
    Contradiction(
        "EVALS-mainloop-draft.md (`Dataset` is a tuple, `EvalResult.tokens`) vs EVALS.md "
        "(`Dataset` class, no token field)",
        "dataset and token shapes",
        "both: `Dataset` is a class, and runners accept any iterable of samples (a tuple too); "
        "`EvalResult.usage` holds the tokens and `EvalResult.tokens` reads their total.",
    ),
    Contradiction(
        "evaluation-abstractions.md (`Sample.ground_truth`, `evaluate(samples, config, "
        "score_fn)`) vs EVALS.md (`expected`, `EvalLoop`)",
        "the second design's names",
        "both spellings work (spec/README.md: its capabilities in this project's API): "
        "`ground_truth` is an alias of `expected`; `samples=`, `config=` and `score_fn=` are "
        "keyword aliases of `evaluate`'s `dataset`, `target` and `evaluator` (both spellings "
        "of one argument: `TypeError`); `EvalConfig` carries the target and the run options; "
        "`EvalResult.trajectory` is a view of the result's parts (`output`, `messages`, "
        "`tool_calls`, `usage`), not a second stored copy, and has no session.",
    ),
    Contradiction(
        "EVALS.md ('Visibility timeout ensures exactly-once', 'Sequential execution', "
        "'No caching', 'No checkpoints')",
        "the reference implementation's limitations",
        "DESIGN.md section 3 wins: at-least-once delivery with idempotent results, "
        "`max_concurrent`, a response cache and resumable run stores.",
    ),
    Contradiction(
        'guide-evaluation-chapter.md#18 (a new `InMemoryMailbox(name="eval-requests")` beside '
        "block 17's) and #24 (`reply_to=canary_results`, collected from `canary_eval_results`)",
        "which mailbox is which",
        "with Redis one name is one queue, so the guide holds there; in memory the suite uses "
        "one mailbox for both names (declared in the table).",
    ),
)


@dataclass(frozen=True, slots=True)
class Alias:
    """A name the spec (or its reference implementation) uses, and ours."""

    spec: str
    """The spec's spelling."""
    ours: str
    """This project's name; the spec's spelling reaches the same thing."""
    source: str
    """Where the spec's name comes from."""


ALIASES: tuple[Alias, ...] = (
    Alias("`MainLoop`", "`AgentLoop` (the same class)", "EVALS-mainloop-draft.md, chapter"),
    Alias(
        "`AgentLoop(requests=...)` then `run()`",
        "`AgentLoop.run(requests)`",
        "reference implementation",
    ),
    Alias(
        "`DLQPolicy(max_delivery_count=...)`",
        "`DLQPolicy(max_deliveries=...)`",
        "reference implementation",
    ),
    Alias("`DebugBundle.load(path)`", "`DebugBundle.open(path)`", "reference implementation"),
    Alias("`JudgeOutput.reason`", "`JudgeOutput.justification`", "EVALS-mainloop-draft.md"),
    Alias(
        "`JudgeOutput.score` / `.passed`",
        "`RATING_VALUES[rating]` / `rating in PASSING_RATINGS`",
        "EVALS-mainloop-draft.md",
    ),
    Alias(
        "`ProviderAdapter[JudgeOutput]`",
        "`ProviderAdapter` (the parameter is optional)",
        "EVALS-mainloop-draft.md",
    ),
    Alias(
        "`Sample(ground_truth=...)`, `sample.ground_truth`",
        "`Sample(expected=...)`, `sample.expected`",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`EvalConfig(max_samples=, max_concurrent=, experiment_name=)`",
        "`evaluate(..., max_samples=, max_concurrent=, experiments=)`",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`evals.analysis`",
        "`weakincentives.evals.analysis` (also re-exported by `weakincentives.evals`)",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`report.config['experiment_name']`",
        "the same, recorded when the run has one experiment (`report.experiment_names` for all)",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`evaluate(samples, config, score_fn, prepare_messages, environment_factory)`",
        "`evaluate(dataset, target_or_config, evaluator, prepare_messages, *, "
        "environment_factory=...)`: the same order; `samples=`, `config=` and `score_fn=` "
        "are keyword aliases of the first three (passing both spellings is a `TypeError`)",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`EvalResult.trajectory`",
        "the same: a read-only `Trajectory` built from `output`, `messages`, `tool_calls` "
        "and `usage` (no session)",
        "evaluation-abstractions.md",
    ),
    Alias(
        "`EvalResult.session_id`",
        "the same: the id of the session the sample ran in (its bundle's "
        "`ids.session_id`; None when nothing reads the session); stored, and a column of "
        "`wink query`'s `results`",
        "guide-evaluation-chapter.md (class diagram)",
    ),
)


def render() -> str:
    """ADAPTATIONS.md, from the tables above."""
    lines = [
        "# The spec as written: how each block runs",
        "",
        "Generated by `python -m tests.spec.adaptations` from `tests/spec/adaptations.py`;",
        "`tests/spec/test_spec_blocks.py` runs every block of `../shared/spec/*.md` as this",
        "table says and fails on a block the table does not know (or knows by another hash).",
        "",
        "Everywhere: the current directory is a fresh temp directory, and `OpenAIAdapter(...)`",
        "is a `FunctionAdapter` over a stand-in model that answers the examples' questions",
        "and judges judge prompts (`tests/spec/standins.py`).",
        "",
        "Kinds: *as written* (unchanged, fresh namespace); *with context* (unchanged code; names",
        "it uses without defining come from earlier blocks or stand-ins); *adapted* (declared",
        "edits to the code); *not python* (diagrams, shell, data; some still checked).",
        "",
        "| block | sha | kind | why |",
        "| --- | --- | --- | --- |",
    ]
    for h in HANDLINGS:
        extra = []
        if h.after:
            extra.append("after blocks " + ", ".join(str(n) for n in h.after))
        if h.edits:
            extra.append(f"{len(h.edits)} edit(s)")
        if h.check is not None:
            extra.append("checked")
        why = h.why + (f" ({'; '.join(extra)})" if extra else "")
        lines.append(f"| `{h.key}` | `{h.sha}` | {h.kind} | {why.replace('|', '/')} |")
    lines += ["", "## Where the spec contradicts itself or DESIGN.md", ""]
    for c in CONTRADICTIONS:
        lines += [f"- **{c.what}**: {c.where}.", f"  Here: {c.here}"]
    lines += ["", "## The spec's names here", "", "| spec | ours | from |", "| --- | --- | --- |"]
    lines += [f"| {a.spec} | {a.ours} | {a.source} |" for a in ALIASES]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    DOCUMENT.write_text(render(), encoding="utf-8")
    print(f"wrote {DOCUMENT}")
