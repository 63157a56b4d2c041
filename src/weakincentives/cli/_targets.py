"""Resolving what `wink eval run` is asked to evaluate: TARGET, evaluators and types.

A reference is `path/to/file.py:object` or `package.module:object`; `object` may be dotted
(`suite.target`). A file is imported under its stem as module name, with its directory
put first on `sys.path` so it can import its neighbours; a module is imported with the
current directory on `sys.path`, as `python -m` would.

TARGET may name:

- an `AgentLoop` instance, or a zero-argument factory (a function or class) that returns
  one;
- a task function, sync or async, taking the sample's input and returning the output;
- a *suite*: any object with a `target` attribute (one of the above) and an `evaluator`
  (or `evaluators`), optionally `dataset` (a `Dataset` or a JSONL path), `input_type`,
  `expected_type` and `experiments`. A zero-argument function returning a suite works too.

Every failure raises `ConfigurationError` with what was wrong and what to do.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weakincentives.errors import ConfigurationError
from weakincentives.evals import (
    Dataset,
    Experiment,
    all_of,
    all_tools_succeeded,
    contains,
    contains_ci,
    exact_match,
    json_equal,
    latency_under,
    max_model_requests,
    numeric_close,
    on_field,
    regex_match,
    regex_search,
    token_usage_under,
    tool_called,
    tool_not_called,
)
from weakincentives.runtime import AgentLoop

__all__ = [
    "BUILTIN_EVALUATORS",
    "ResolvedTarget",
    "combine_evaluators",
    "load_object",
    "load_type",
    "resolve_evaluator",
    "resolve_target",
]

_MAX_FACTORY_DEPTH = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedTarget:
    """What TARGET resolved to, with whatever a suite bundled alongside it."""

    target: Any
    """An `AgentLoop` instance or a task function (sync or async)."""
    input_type: Any = Any
    """Type the dataset's `input` is loaded as (`Any`: raw JSON)."""
    expected_type: Any = Any
    """Type the dataset's `expected` is loaded as (`Any`: raw JSON)."""
    dataset: Dataset[Any, Any] | str | Path | None = None
    """The suite's dataset (or its path), if it has one."""
    evaluators: tuple[Callable[..., Any], ...] = ()
    """The suite's evaluators, if it has any."""
    experiments: tuple[Experiment, ...] = ()
    """The suite's experiments, if it has any."""


# -- loading references -------------------------------------------------------------------


def load_object(reference: str, *, what: str = "TARGET") -> Any:
    """Import `path.py:object` or `module:object` and return the object.

    Raises:
        ConfigurationError: malformed reference, missing file or module, import failure,
            or no such attribute.
    """
    location, sep, attribute = reference.rpartition(":")
    if not sep or not location or not attribute:
        raise ConfigurationError(
            f"{what} {reference!r} must look like path/to/file.py:object or module:object"
        )
    module = _import(location, what)
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(
                f"{what} {reference!r}: {module.__name__} has no attribute {attribute!r}"
                + _suggest(part, obj)
            ) from None
    return obj


def _suggest(name: str, obj: Any) -> str:
    public = sorted(n for n in dir(obj) if not n.startswith("_"))
    close = difflib.get_close_matches(name, public, n=3)
    if close:
        return f"; did you mean {', '.join(close)}?"
    shown = ", ".join(public[:10]) + (", ..." if len(public) > 10 else "")
    return f"; it defines: {shown or 'nothing public'}"


def load_type(reference: str, *, what: str) -> Any:
    """Load a type named by `module:Type` (or `path.py:Type`), for `--input-type` etc.

    Raises:
        ConfigurationError: the reference does not resolve to a type.
    """
    obj = load_object(reference, what=what)
    if not isinstance(obj, type) and typing.get_origin(obj) is None:
        raise ConfigurationError(f"{what} {reference!r} is a {type(obj).__name__}, not a type")
    return obj


def _import(location: str, what: str) -> Any:
    if location.endswith(".py") or "/" in location or "\\" in location:
        return _import_file(Path(location), what)
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as exc:
        if exc.name and location.startswith(exc.name):
            raise ConfigurationError(
                f"{what}: no module named {location!r}; check the name, or pass a file path "
                "such as path/to/file.py:object"
            ) from exc
        raise ConfigurationError(f"{what}: importing {location!r} failed: {exc}") from exc
    except Exception as exc:
        raise ConfigurationError(
            f"{what}: importing {location!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _import_file(path: Path, what: str) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise ConfigurationError(f"{what}: no such file {path}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"{what}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    # Registered before running it: dataclasses and pickling-free serde look modules up by
    # name, and the run fingerprint names the target `<stem>.<object>`.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigurationError(
            f"{what}: importing {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


# -- targets --------------------------------------------------------------------------------


def resolve_target(reference: str) -> ResolvedTarget:
    """Load TARGET and work out what it is (see the module docstring).

    Raises:
        ConfigurationError: it cannot be loaded or is none of the accepted kinds.
    """
    return _classify(load_object(reference), reference, depth=0)


def _classify(obj: Any, reference: str, *, depth: int) -> ResolvedTarget:
    if isinstance(obj, AgentLoop):
        return ResolvedTarget(target=obj, input_type=_loop_input_type(obj))
    if _is_suite(obj):
        return _from_suite(obj, reference, depth=depth)
    if not callable(obj):
        raise ConfigurationError(
            f"TARGET {reference!r} is a {type(obj).__name__}; point it at an AgentLoop, a "
            "factory returning one, a task function or a suite"
        )
    if inspect.iscoroutinefunction(obj) or _required_params(obj) > 0:
        if isinstance(obj, type):
            raise ConfigurationError(
                f"TARGET {reference!r} is the class {obj.__name__}, which needs constructor "
                "arguments; point TARGET at a function that builds and returns it"
            )
        return ResolvedTarget(target=obj, input_type=_first_param_type(obj))
    if depth >= _MAX_FACTORY_DEPTH:
        raise ConfigurationError(f"TARGET {reference!r}: factories nest too deeply")
    try:
        built = obj()
    except Exception as exc:
        raise ConfigurationError(
            f"TARGET {reference!r}: calling the factory failed: {type(exc).__name__}: {exc}"
        ) from exc
    return _classify(built, reference, depth=depth + 1)


def _is_suite(obj: Any) -> bool:
    return (
        not isinstance(obj, type)
        and hasattr(obj, "target")
        and (hasattr(obj, "evaluator") or hasattr(obj, "evaluators"))
    )


def _from_suite(suite: Any, reference: str, *, depth: int) -> ResolvedTarget:
    inner = _classify(suite.target, f"{reference}.target", depth=depth)
    evaluators = getattr(suite, "evaluators", None)
    if evaluators is None:
        evaluators = (suite.evaluator,)
    elif callable(evaluators):
        evaluators = (evaluators,)
    dataset = getattr(suite, "dataset", None)
    if dataset is not None and not isinstance(dataset, Dataset | str | Path):
        raise ConfigurationError(
            f"TARGET {reference!r}: suite.dataset is a {type(dataset).__name__}; "
            "use a Dataset or the path of a JSONL file"
        )
    return ResolvedTarget(
        target=inner.target,
        input_type=getattr(suite, "input_type", None) or inner.input_type,
        expected_type=getattr(suite, "expected_type", None) or Any,
        dataset=dataset,
        evaluators=tuple(evaluators),
        experiments=tuple(getattr(suite, "experiments", None) or ()),
    )


def _required_params(fn: Callable[..., Any]) -> int:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1  # a builtin we cannot inspect: treat it as a task function
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(
        1
        for p in signature.parameters.values()
        if p.kind in kinds and p.default is inspect.Parameter.empty
    )


def _loop_input_type(loop: AgentLoop[Any, Any]) -> Any:
    for cls in type(loop).__mro__:
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is AgentLoop:
                args = typing.get_args(base)
                if args and not isinstance(args[0], typing.TypeVar):
                    return args[0]
    return Any


def _first_param_type(fn: Callable[..., Any]) -> Any:
    try:
        hints = typing.get_type_hints(fn)
        first = next(iter(inspect.signature(fn).parameters))
    except Exception:  # unresolvable annotations: load inputs as raw JSON
        return Any
    return hints.get(first, Any)


# -- evaluators -----------------------------------------------------------------------------

_PLAIN: dict[str, Callable[..., Any]] = {
    "exact_match": exact_match,
    "contains": contains,
    "contains_ci": contains_ci,
    "json_equal": json_equal,
}
# Factories: name -> (how to build it from the text after `=`, or from nothing).
_FACTORIES: dict[str, tuple[str, Callable[[str | None], Callable[..., Any]]]] = {
    "numeric_close": (
        "[=REL_TOL]",
        lambda a: numeric_close(rel_tol=float(a)) if a else numeric_close(),
    ),
    "all_tools_succeeded": ("", lambda a: all_tools_succeeded()),
    "tool_called": ("=TOOL", lambda a: tool_called(_need(a))),
    "tool_not_called": ("=TOOL", lambda a: tool_not_called(_need(a))),
    "max_model_requests": ("=N", lambda a: max_model_requests(int(_need(a)))),
    "token_usage_under": ("=TOKENS", lambda a: token_usage_under(int(_need(a)))),
    "latency_under": ("=MS", lambda a: latency_under(float(_need(a)))),
    "regex_match": ("[=PATTERN]", lambda a: regex_match(a)),
    "regex_search": ("[=PATTERN]", lambda a: regex_search(a)),
}

_ON_FIELD = frozenset({"exact_match", "contains", "contains_ci", "json_equal", "numeric_close"})
"""Built-ins that `NAME[=ARG]:FIELD` points at one field of a structured output."""

BUILTIN_EVALUATORS: tuple[str, ...] = tuple(
    sorted([*_PLAIN, *(f"{name}{syntax}" for name, (syntax, _) in _FACTORIES.items())])
)
"""The evaluator names `--evaluator` accepts besides `module:object`, with their syntax."""


class _MissingArgumentError(ValueError):
    pass


def _need(argument: str | None) -> str:
    if not argument:
        raise _MissingArgumentError
    return argument


def resolve_evaluator(spec: str) -> Callable[..., Any]:
    """Resolve one `--evaluator` value.

    It is a built-in name (see `BUILTIN_EVALUATORS`), optionally pointed at a field of a
    structured output (`numeric_close:answer`, `exact_match:answer`), or a `module:object`
    reference to an evaluator or to a zero-argument evaluator factory.

    Raises:
        ConfigurationError: unknown name, bad argument, or a reference that is not callable.
    """
    head, colon, field = spec.rpartition(":")
    if colon and head.partition("=")[0] in _ON_FIELD and field.isidentifier():
        return on_field(resolve_evaluator(head), field)
    name, eq, argument = spec.partition("=")
    if name in _PLAIN and not eq:
        return _PLAIN[name]
    if name in _FACTORIES:
        syntax, build = _FACTORIES[name]
        try:
            return build(argument if eq else None)
        except _MissingArgumentError:
            raise ConfigurationError(
                f"--evaluator {name} needs an argument: {name}{syntax}"
            ) from None
        except (ValueError, ConfigurationError) as exc:
            raise ConfigurationError(f"--evaluator {spec!r}: {exc}") from exc
    if ":" not in spec:
        raise ConfigurationError(
            f"--evaluator {spec!r} is not a built-in ({', '.join(BUILTIN_EVALUATORS)}) "
            "nor a module:object reference"
        )
    obj = load_object(spec, what="--evaluator")
    if not callable(obj):
        raise ConfigurationError(f"--evaluator {spec!r} is a {type(obj).__name__}, not callable")
    if not isinstance(obj, type) and _required_params(obj) == 0:
        obj = obj()  # a factory such as all_tools_succeeded
        if not callable(obj):
            raise ConfigurationError(f"--evaluator {spec!r}: its factory returned no callable")
    return typing.cast("Callable[..., Any]", obj)


def combine_evaluators(evaluators: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    """One evaluator from several: itself when alone, else `all_of(...)`.

    Raises:
        ConfigurationError: there are none.
    """
    if not evaluators:
        raise ConfigurationError(
            "no evaluator: pass --evaluator NAME (e.g. --evaluator exact_match) or use a "
            "suite that names one"
        )
    if len(evaluators) == 1:
        return evaluators[0]
    return typing.cast("Callable[..., Any]", all_of(*evaluators))
