"""Which experiments `wink eval compare` pairs: within one run, or across two runs.

Across two runs: the experiments named by `--baseline` / `--treatment`; else the single
experiment of each run; else every experiment by name when both runs have the same ones.
Anything else is ambiguous, and one `ConfigurationError` lists the choices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.evals import EvalReport, EvalResult

__all__ = ["across", "experiments_in_order", "read_prefixes", "within"]


def experiments_in_order(loaded: EvalReport, prefix: str = "") -> list[str]:
    """The run's experiments in their configured order (then any others, as they came).

    `prefix` is what the run's experiment names were read with (`read_prefixes`): the
    names returned are without it, as the run recorded them.
    """
    fingerprint = loaded.config.get("fingerprint")
    experiments = fingerprint.get("experiments") if isinstance(fingerprint, dict) else None
    names = [name.removeprefix(prefix) for name in loaded.experiment_names]
    ordered: list[str] = []
    for entry in experiments if isinstance(experiments, list) else ():
        name = entry.get("name") if isinstance(entry, dict) else None
        if name in names and name not in ordered:
            ordered.append(str(name))
    return ordered + [name for name in names if name not in ordered]


def read_prefixes(run_id_a: Any, run_id_b: Any) -> tuple[str, str]:
    """The prefixes to read two runs' experiment names with, to compare them (`across`).

    They are the prefixes of the labels `across` gives (`RUN_ID/NAME`, and `A/NAME`,
    `B/NAME` when both runs have the same id, or none), so that the results of both runs
    go into one report as they were read, not copied to be renamed.
    """
    prefix_a, prefix_b = f"{run_id_a or 'A'}/", f"{run_id_b or 'B'}/"
    return ("A/", "B/") if prefix_a == prefix_b else (prefix_a, prefix_b)


def within(
    loaded: EvalReport, baseline: str | None, treatment: str | None
) -> tuple[EvalReport, str]:
    """Two (or all) experiments of one run, and the baseline to compare against.

    Raises:
        ConfigurationError: the run has one experiment, or a name is not in it.
    """
    names = loaded.experiment_names
    if len(names) < 2:
        raise ConfigurationError(
            f"run {loaded.run_id} has one experiment ({', '.join(names) or 'none'}); "
            "pass a second run to compare with: wink eval compare RUN_A RUN_B"
        )
    base = baseline or experiments_in_order(loaded)[0]
    for name in (base, treatment):
        if name is not None:
            loaded.experiment(name)  # raises, listing the experiments, when absent
    keep = {base, treatment} if treatment else set(names)
    return loaded.filter(lambda r: r.experiment_name in keep), base


def across(
    a: EvalReport,
    b: EvalReport,
    baseline: str | None,
    treatment: str | None,
    *,
    prefixes: tuple[str, str] = ("", ""),
) -> list[tuple[EvalReport, str]]:
    """Pairs of experiments of two runs: as asked, by name, or the single one of each.

    Each pair is labelled `RUN_ID/NAME` (`A/NAME` and `B/NAME` when the labels would be
    the same). `prefixes` are what `a` and `b`'s experiment names were read with
    (`read_prefixes`): results already named as their label are not copied.

    Raises:
        ConfigurationError: the pairing is ambiguous (the message lists the choices).
    """
    names_a = experiments_in_order(a, prefixes[0])
    names_b = experiments_in_order(b, prefixes[1])
    if baseline is not None or treatment is not None:
        base = baseline or (treatment if treatment in names_a else _only(names_a))
        treat = treatment or (baseline if baseline in names_b else _only(names_b))
        if base is not None and treat is not None:
            _check(base, names_a)
            _check(treat, names_b)
            return [_pair(a, b, base, treat, prefixes)]
    elif len(names_a) == 1 and len(names_b) == 1:
        return [_pair(a, b, names_a[0], names_b[0], prefixes)]
    elif names_a and set(names_a) == set(names_b):
        return [_pair(a, b, name, name, prefixes) for name in names_a]
    raise ConfigurationError(
        f"cannot pair the experiments of run {a.run_id or 'A'} ({', '.join(names_a) or 'none'}) "
        f"with those of run {b.run_id or 'B'} ({', '.join(names_b) or 'none'}); pick them with "
        f"--baseline NAME (one of {', '.join(names_a) or 'none'}) and --treatment NAME (one of "
        f"{', '.join(names_b) or 'none'})"
    )


def _check(name: str, names: Sequence[str]) -> None:
    """Raise, listing the experiments, when `name` is not one of them (as `experiment`)."""
    if name not in names:
        known = ", ".join(repr(n) for n in names) or "none"
        raise ConfigurationError(
            f"no results for experiment {name!r}; experiments in the report: {known}"
        )


def _pair(
    a: EvalReport, b: EvalReport, base: str, treat: str, prefixes: tuple[str, str]
) -> tuple[EvalReport, str]:
    label_a, label_b = f"{a.run_id or 'A'}/{base}", f"{b.run_id or 'B'}/{treat}"
    if label_a == label_b:
        label_a, label_b = f"A/{base}", f"B/{treat}"
    results = [
        *_labelled(a.experiment(prefixes[0] + base).results, prefixes[0] + base, label_a),
        *_labelled(b.experiment(prefixes[1] + treat).results, prefixes[1] + treat, label_b),
    ]
    return EvalReport(results=tuple(results)), label_a


def _labelled(results: Sequence[EvalResult], name: str, label: str) -> Sequence[EvalResult]:
    """`results` (all named `name`) named `label`: as they are when they already are."""
    return results if name == label else [_renamed(r, label) for r in results]


# The slot descriptors of `EvalResult`: `_renamed` copies a result through them.
_SLOTS = tuple(EvalResult.__dict__[f.name] for f in dataclasses.fields(EvalResult))
_SET_EXPERIMENT = EvalResult.__dict__["experiment_name"].__set__


def _renamed(result: EvalResult, experiment_name: str) -> EvalResult:
    """`dataclasses.replace(result, experiment_name=...)` at a tenth of the cost."""
    renamed = object.__new__(EvalResult)
    for slot in _SLOTS:
        slot.__set__(renamed, slot.__get__(result, EvalResult))
    _SET_EXPERIMENT(renamed, experiment_name)
    return renamed


def _only(names: Sequence[str]) -> str | None:
    return names[0] if len(names) == 1 else None
