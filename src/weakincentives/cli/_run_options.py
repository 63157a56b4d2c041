"""The options of `wink eval run` that pick the data and the model.

Dataset source (`--format`, `--field`, `--split`, `--allow-extra-fields`), selection
(`--limit`, `--sample-id`, `--where`, `--shuffle`, `--seed`), model overrides (`--model`,
`--model-arg`, `--judge-model`) and labels (`--tag`, `--note`), as typer annotations,
and the values they build.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, cast

import typer

from weakincentives.errors import ConfigurationError
from weakincentives.evals import FORMATS, TRANSFORMS, Selection

from ._plan import SourceOptions

__all__ = [
    "ExtraFieldsOption",
    "FieldOption",
    "FormatOption",
    "JudgeModelOption",
    "LimitOption",
    "ModelArgOption",
    "ModelOption",
    "NoteOption",
    "SampleIdOption",
    "SeedOption",
    "ShuffleOption",
    "SplitOption",
    "TagOption",
    "WhereOption",
    "selection_of",
    "source_of",
]

_FORMAT_HELP = f"Dataset format: {', '.join(FORMATS)} (default: from the file name)."
_FIELD_HELP = (
    "Map a sample part to a dataset field (repeatable): TARGET=FIELD[|TRANSFORM...], TARGET "
    "one of id, input, expected, metadata, metadata.KEY; transforms: "
    + ", ".join(TRANSFORMS)
    + ". GSM8K: --field input=question --field 'expected=answer|after:####'."
)
_WHERE_HELP = (
    "Keep samples where an expression holds: paths id, input, expected, metadata.KEY; "
    "==, !=, <, <=, >, >=, in, not in; and, or, not; strings, numbers, true, false, null, "
    """lists. E.g. 'metadata.topic == "algebra" and metadata.level >= 2'."""
)
FormatOption = Annotated[
    str | None, typer.Option("--format", help=_FORMAT_HELP, show_default=False)
]
FieldOption = Annotated[list[str] | None, typer.Option("--field", help=_FIELD_HELP)]
SplitOption = Annotated[
    str | None, typer.Option(help="Hugging Face split (test, train, ...).", show_default=False)
]
ExtraFieldsOption = Annotated[
    bool,
    typer.Option(
        "--allow-extra-fields", help="Keep unmapped dataset fields as metadata (else an error)."
    ),
]
LimitOption = Annotated[
    int | None,
    typer.Option(
        min=1, help="Run at most N samples (after the other selections).", show_default=False
    ),
]
SampleIdOption = Annotated[
    list[str] | None,
    typer.Option(
        "--sample-id", help="Run only these ids (repeatable, comma-separated, globs like q1*)."
    ),
]
WhereOption = Annotated[str | None, typer.Option(help=_WHERE_HELP, show_default=False)]
ShuffleOption = Annotated[
    bool, typer.Option("--shuffle", help="Shuffle (with --seed) before --limit: a random subset.")
]
SeedOption = Annotated[int, typer.Option(help="Seed of --shuffle.")]
ModelOption = Annotated[
    str | None,
    typer.Option(help="Model of the target's adapter (overrides the code).", show_default=False),
]
ModelArgOption = Annotated[
    list[str] | None,
    typer.Option(
        "--model-arg", help="Sampling parameter for the target's model (repeatable): KEY=VALUE."
    ),
]
JudgeModelOption = Annotated[
    str | None, typer.Option(help="Model of every llm_judge evaluator.", show_default=False)
]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Label the run (repeatable; wink eval list).")
]
NoteOption = Annotated[
    str | None, typer.Option(help="A note kept with the run.", show_default=False)
]


def selection_of(
    limit: int | None, sample_ids: Sequence[str], where: str | None, shuffle: bool, seed: int
) -> Selection:
    """The `Selection` of the flags (`--sample-id` values may hold several, comma-separated).

    Raises:
        ConfigurationError: a malformed `--where` or a bad `--limit`.
    """
    ids = tuple(part.strip() for value in sample_ids for part in value.split(",") if part.strip())
    return Selection(limit=limit, sample_ids=ids, where=where, shuffle=shuffle, seed=seed)


def source_of(
    fmt: str | None, fields: Sequence[str], split: str | None, extra: bool
) -> SourceOptions:
    if fmt is not None and fmt not in FORMATS:
        raise ConfigurationError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    return SourceOptions(
        format=cast(Any, fmt), fields=tuple(fields), split=split, allow_extra_fields=extra
    )
