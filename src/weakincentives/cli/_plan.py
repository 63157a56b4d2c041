"""Planning `wink eval run`: TARGET, dataset source and selection, evaluators, model overrides.

`build_plan` resolves everything before a sample runs, so each mistake (a bad reference,
a malformed dataset row, an unknown `--sample-id`, a model that cannot be overridden) is
one `ConfigurationError` or `InvalidDatasetError` and exit 2, never a half-made run.

A dataset file is read once up front (every row is checked, the selection counted and
hashed) and streamed again by the run, so memory stays flat however large the file is.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from weakincentives.adapters import configure_model, describe_adapter, parse_model_args
from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    BASELINE,
    Dataset,
    DatasetFormat,
    DatasetProvenance,
    Experiment,
    FieldMap,
    SampleFile,
    SelectedSamples,
    Selection,
    judge_adapter,
    with_judge_adapter,
)
from weakincentives.runtime import AgentLoop

from ._experiments import parse_experiments
from ._targets import combine_evaluators, load_type, resolve_evaluator, resolve_target

__all__ = [
    "ModelOptions",
    "RunPlan",
    "SourceOptions",
    "build_plan",
    "plan_args",
    "target_model",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    """How to read `--dataset`: `--format`, `--field`, `--split`, `--allow-extra-fields`."""

    format: DatasetFormat | None = None
    """The format (None: from the file name; a directory is a Hugging Face dataset)."""
    fields: Sequence[str] = ()
    """`--field TARGET=FIELD[|TRANSFORM]` specs."""
    split: str | None = None
    """Hugging Face split."""
    allow_extra_fields: bool = False
    """Keep unmapped fields as metadata instead of refusing them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOptions:
    """`--model`, `--model-arg` and `--judge-model`."""

    model: str | None = None
    """Model of the target's adapter."""
    model_args: Sequence[str] = ()
    """`KEY=VALUE` sampling parameters for the target's adapter."""
    judge_model: str | None = None
    """Model of every `llm_judge` evaluator."""

    def fingerprint(self) -> dict[str, Any]:
        """What goes into the run's fingerprint (empty without overrides)."""
        out: dict[str, Any] = {}
        if self.model is not None or self.model_args:
            out["model_override"] = {
                "model": self.model,
                "parameters": parse_model_args(self.model_args),
            }
        if self.judge_model is not None:
            out["judge_model_override"] = self.judge_model
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """Everything `wink eval run` resolved before running."""

    target: Any
    """`AgentLoop` or task function."""
    dataset: Dataset[Any, Any] | SelectedSamples
    """The samples (a selection of a file is streamed by the run)."""
    evaluator: Any
    """The (combined) evaluator."""
    experiments: tuple[Experiment, ...]
    """Experiments to run, the first one the baseline of comparisons."""
    selection: Selection = field(default_factory=Selection)
    """Which samples of the source the run covers."""
    source: DatasetProvenance | None = None
    """Where the samples came from (None: a suite's in-memory dataset)."""
    models: ModelOptions = field(default_factory=ModelOptions)
    """Model overrides."""

    @property
    def dataset_sha256(self) -> str:
        """Content hash of the samples the run covers."""
        return self.dataset.sha256

    def fingerprint_extra(self) -> dict[str, Any]:
        """Selection and model overrides: they change what a run computes."""
        extra = self.models.fingerprint()
        if not self.selection.is_everything:
            extra["selection"] = self.selection.to_dict()
        return extra

    def run_info(self, *, tags: Sequence[str] = (), note: str | None = None) -> dict[str, Any]:
        """What the run records besides its fingerprint: source, selection, model, labels."""
        info: dict[str, Any] = {"tags": list(tags)} if tags else {}
        if note:
            info["note"] = note
        if self.source is not None:
            info["dataset"] = self.source.to_dict()
        if not self.selection.is_everything:
            info["selection"] = self.selection.describe()
        model = target_model(self.target)
        if model is not None:
            info["model"] = model
        return info


def target_model(target: object) -> str | None:
    """The model name of an `AgentLoop` target's adapter (None for a task function)."""
    if not isinstance(target, AgentLoop):
        return None
    info = describe_adapter(target.adapter)
    if info.provider != "unknown":
        return info.model
    # An adapter without `describe()`: its conventional attribute, if it has one.
    for attribute in ("model", "model_name"):
        value = getattr(target.adapter, attribute, None)
        if isinstance(value, str):
            return value
    return None


def build_plan(
    target: str,
    *,
    dataset: Path | None,
    evaluators: Sequence[str],
    experiments: Sequence[str],
    input_type: str | None = None,
    expected_type: str | None = None,
    source: SourceOptions | None = None,
    selection: Selection | None = None,
    models: ModelOptions | None = None,
    needs_evaluator: bool = True,
) -> RunPlan:
    """Resolve TARGET, types, dataset, selection, evaluators, experiments and models.

    With `needs_evaluator=False` (a run on Redis workers, which score with their own
    evaluator) no evaluator is required nor resolved.

    Raises:
        ConfigurationError: any reference or option is wrong.
        InvalidDatasetError: the dataset does not load (the message names file and line).
    """
    source = source or SourceOptions()
    selection = selection or Selection()
    models = models or ModelOptions()
    resolved = resolve_target(target)
    in_type = load_type(input_type, what="--input-type") if input_type else resolved.input_type
    exp_type = (
        load_type(expected_type, what="--expected-type")
        if expected_type
        else resolved.expected_type
    )
    where = dataset if dataset is not None else resolved.dataset
    if where is None:
        _raise_config("no dataset: pass --dataset FILE (.jsonl, .json, .csv, .parquet) or a suite")
    provenance = None
    if isinstance(where, Dataset):
        samples: Dataset[Any, Any] | SelectedSamples = (
            where if selection.is_everything else SelectedSamples(where, selection)
        )
    else:
        file: SampleFile[Any, Any] = SampleFile(
            where, in_type, exp_type, format=source.format,
            fields=FieldMap.parse(source.fields) if source.fields else None,
            split=source.split, allow_extra_fields=source.allow_extra_fields,
        )  # fmt: skip
        samples = SelectedSamples(file, selection)
        provenance = file.provenance()
    if isinstance(samples, SelectedSamples):
        samples.scan()  # every row checked now, before the run directory exists
    chosen = [resolve_evaluator(s) for s in evaluators] or list(resolved.evaluators)
    return RunPlan(
        target=_with_model(resolved.target, models),
        dataset=samples,
        evaluator=(
            combine_evaluators(_with_judge_model(chosen, models.judge_model))
            if needs_evaluator
            else None
        ),
        experiments=parse_experiments(experiments, resolved.experiments or (BASELINE,)),
        selection=selection,
        source=provenance,
        models=models,
    )


def _with_model(target: Any, models: ModelOptions) -> Any:
    if models.model is None and not models.model_args:
        return target
    if not isinstance(target, AgentLoop):
        _raise_config(
            "--model and --model-arg replace the model of an AgentLoop's adapter; TARGET is a "
            "task function, which calls its model itself (read the model name from an "
            "environment variable there, e.g. OPENAI_MODEL)"
        )
    loop = copy.copy(target)
    loop.adapter = configure_model(
        target.adapter, models.model, parse_model_args(models.model_args)
    )
    return loop


def _with_judge_model(
    evaluators: list[Callable[..., Any]], judge_model: str | None
) -> list[Callable[..., Any]]:
    """Every `llm_judge` (also inside `all_of` / `any_of`) asking `judge_model` instead."""
    if judge_model is None:
        return evaluators
    if not any(judge_adapter(evaluator) is not None for evaluator in evaluators):
        _raise_config(
            "--judge-model: none of the evaluators is (or holds) an llm_judge; pass one with "
            "--evaluator module:judge, or leave --judge-model out"
        )

    def change(adapter: Any) -> Any:
        return configure_model(adapter, judge_model, {}, what="--judge-model")

    return [
        with_judge_adapter(evaluator, change) if judge_adapter(evaluator) is not None else evaluator
        for evaluator in evaluators
    ]


def _raise_config(message: str) -> NoReturn:
    raise ConfigurationError(message)


def plan_args(source: SourceOptions, selection: Selection, models: ModelOptions) -> list[str]:
    """The command-line flags that rebuild these options (for the `--resume` hint)."""
    args: list[str] = []
    if source.format:
        args += ["--format", source.format]
    for spec in source.fields:
        args += ["--field", spec]
    if source.split:
        args += ["--split", source.split]
    if source.allow_extra_fields:
        args.append("--allow-extra-fields")
    for sample_id in selection.sample_ids:
        args += ["--sample-id", sample_id]
    if selection.where is not None:
        args += ["--where", selection.where]
    if selection.shuffle:
        args += ["--shuffle", "--seed", str(selection.seed)]
    if selection.limit is not None:
        args += ["--limit", str(selection.limit)]
    if models.model:
        args += ["--model", models.model]
    for arg in models.model_args:
        args += ["--model-arg", arg]
    if models.judge_model:
        args += ["--judge-model", models.judge_model]
    return args
