"""Prompt templates: Markdown sections with `$placeholders`, tools and an output type."""

from __future__ import annotations

import dataclasses
import functools
import string
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar, cast

from weakincentives import serde
from weakincentives._frozen import quick_init
from weakincentives.errors import PromptParamsError, PromptRenderError
from weakincentives.prompt._overrides import (
    PromptOverridesStore,
    StaleOverrideWarning,
    section_hash,
    validate_identifier,
)
from weakincentives.prompt._tool import Tool
from weakincentives.runtime.session import ChatMessage

__all__ = ["MarkdownSection", "Prompt", "PromptTemplate", "RenderedPrompt"]

OutputT = TypeVar("OutputT")
ParamsT = TypeVar("ParamsT")


def _placeholders(text: str) -> tuple[str, ...]:
    return _compiled(text)[1]


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> tuple[string.Template, tuple[str, ...]]:
    """`text` as a `string.Template`, and its placeholders: once per text, not per render."""
    template = string.Template(text)
    return template, tuple(template.get_identifiers())


@functools.lru_cache(maxsize=256)
def _field_names(cls: Any) -> frozenset[str]:  # a dataclass type
    return frozenset(f.name for f in dataclasses.fields(cls))


# No slots: `MarkdownSection[T](...)` sets __orig_class__, which slotted frozen classes reject.
@dataclass(frozen=True)
class MarkdownSection(Generic[ParamsT]):
    """A titled block of Markdown whose `$name` placeholders come from a params dataclass.

    Without `params_type`, values come from keyword arguments to `Prompt.bind`.
    """

    title: str
    """Heading rendered above the body (empty for none)."""
    key: str
    """Stable key; overrides refer to the section by it."""
    template: str
    """Markdown body with `$name` / `${name}` placeholders (`$$` for a literal `$`)."""
    params_type: type[ParamsT] | None = None
    """Dataclass whose fields fill the placeholders."""
    role: Literal["system", "user"] = "system"
    """Which chat message the section is rendered into."""

    def __post_init__(self) -> None:
        validate_identifier("key", self.key)
        _check_placeholders(self, self.template)

    def field_names(self) -> tuple[str, ...] | None:
        """Names the placeholders may use, or None when any keyword is accepted."""
        if self.params_type is None:
            return None
        return tuple(f.name for f in dataclasses.fields(self.params_type))  # type: ignore[arg-type]


def _check_placeholders(section: MarkdownSection[Any], text: str) -> None:
    if not string.Template(text).is_valid():
        # `string.Template.substitute` would raise a bare ValueError at render time.
        raise PromptRenderError(
            f"section {section.key!r} has a malformed placeholder (a `$` not followed by a "
            "name); write `$$` for a literal dollar sign",
        )
    allowed = section.field_names()
    if allowed is None:
        return
    for name in _placeholders(text):
        if name not in allowed:
            raise PromptRenderError(
                f"section {section.key!r} uses unknown placeholder ${name}; "
                f"{section.params_type.__name__} has fields: {', '.join(allowed)}",  # type: ignore[union-attr]
            )


# No slots: `PromptTemplate[T](...)` sets __orig_class__, which slotted frozen classes reject.
@dataclass(frozen=True)
class PromptTemplate(Generic[OutputT]):
    """A reusable prompt: sections, tools and an optional structured output type."""

    ns: str
    """Namespace (e.g. the application); part of the overrides path."""
    key: str
    """Key of the prompt within its namespace."""
    sections: Sequence[MarkdownSection[Any]] = ()
    """Sections rendered in order."""
    tools: Sequence[Tool[Any]] = ()
    """Tools the model may call."""
    output_type: type[OutputT] | None = None
    """Dataclass the final answer is parsed into (None for plain text)."""
    name: str | None = None
    """Display name (defaults to `ns/key`)."""

    def __post_init__(self) -> None:
        validate_identifier("namespace", self.ns)
        validate_identifier("key", self.key)
        keys = [s.key for s in self.sections]
        if len(keys) != len(set(keys)):
            raise PromptRenderError(f"prompt {self.ns}/{self.key} has duplicate section keys")
        tool_names = [t.name for t in self.tools]
        if len(tool_names) != len(set(tool_names)):
            raise PromptRenderError(f"prompt {self.ns}/{self.key} has duplicate tool names")
        # Read per render (per sample), so worked out once here.
        object.__setattr__(self, "_display_name", self.name or f"{self.ns}/{self.key}")
        accepted = tuple(s.params_type for s in self.sections if s.params_type is not None)
        object.__setattr__(self, "_params_types", accepted)
        object.__setattr__(self, "_bindable", set())  # param types `bind` has checked
        object.__setattr__(self, "_render_plan", None)  # made by the first `render`
        # The output type's validator and schema, and the tools', are built when an agent
        # loop is (`serde.prepare_pending`), not on the first sample of its first run.
        if self.output_type is not None:
            serde.prepare_later(self.output_type)
        for tool in self.tools:
            serde.prepare_later(tool.params_type)

    @property
    def display_name(self) -> str:
        """`name`, or `ns/key` when no name was given."""
        return self._display_name  # type: ignore[attr-defined,no-any-return]  # __post_init__


@quick_init
@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """A prompt ready to send: messages, tools and what was applied."""

    messages: tuple[ChatMessage, ...]
    """System and user messages."""
    tools: tuple[Tool[Any], ...]
    """Tools offered to the model."""
    output_type: type[Any] | None
    """Structured output type, if any."""
    applied_overrides: tuple[str, ...] = ()
    """Keys of sections whose body came from an override."""

    @property
    def text(self) -> str:
        """All message contents joined, for logs and hashing."""
        return "\n\n".join(m.content or "" for m in self.messages)


# No slots: `Prompt[T](...)` sets __orig_class__, which slotted frozen classes reject.
@quick_init
@dataclass(frozen=True)
class Prompt(Generic[OutputT]):
    """A template plus bound params and where its overrides come from.

    Examples:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Q:
        ...     question: str
        >>> t = PromptTemplate[str](ns="demo", key="qa", sections=(
        ...     MarkdownSection("Question", "question", "$question", Q, role="user"),))
        >>> print(Prompt(t).bind(Q("2+2?")).render().messages[0].content)
        ## Question
        <BLANKLINE>
        2+2?
    """

    template: PromptTemplate[OutputT]
    """The template being rendered."""
    overrides_store: PromptOverridesStore | None = None
    """Store consulted for section overrides (None: no overrides)."""
    overrides_tag: str = "latest"
    """Tag selecting which overrides apply."""
    params: tuple[Any, ...] = ()
    """Bound params dataclass instances."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """Bound keyword values for sections without a params type."""

    @property
    def name(self) -> str:
        """Display name of the template."""
        return self.template.display_name

    def bind(self, *params: Any, **values: Any) -> Prompt[OutputT]:
        """Return a copy with more params bound.

        Positional arguments are params dataclass instances, matched to sections by type;
        keyword arguments fill placeholders of sections that have no params type.

        Raises:
            PromptParamsError: when a positional value matches no section's params type.
        """
        template = self.template
        accepted: tuple[type[Any], ...] = template._params_types  # type: ignore[attr-defined]
        bindable: set[type[Any]] = template._bindable  # type: ignore[attr-defined]
        for p in params:
            if type(p) in bindable:  # a type this template took before: checked then
                continue
            if not dataclasses.is_dataclass(p) or isinstance(p, type):
                raise PromptParamsError(
                    f"prompt {self.name}: bind() takes params dataclass instances, "
                    f"got {type(p).__name__}; pass plain values as keywords",
                )
            if not any(isinstance(p, t) for t in accepted):
                names = ", ".join(t.__name__ for t in accepted) or "none"
                raise PromptParamsError(
                    f"prompt {self.name}: no section takes {type(p).__name__} "
                    f"(sections take: {names})",
                )
            bindable.add(type(p))
        merged = {**self.values, **values} if values else self.values
        if type(self) is not Prompt:  # a subclass may have more fields: let `replace` copy them
            return dataclasses.replace(self, params=(*self.params, *params), values=merged)
        # The constructor, not `dataclasses.replace` (which reads every field first): an
        # agent binds a prompt per sample.
        return Prompt(
            self.template, self.overrides_store, self.overrides_tag, (*self.params, *params),
            merged,
        )  # fmt: skip

    def with_overrides(self, store: PromptOverridesStore | None, tag: str) -> Prompt[OutputT]:
        """Return a copy that renders with `store`'s overrides under `tag`."""
        validate_identifier("tag", tag)
        return dataclasses.replace(self, overrides_store=store, overrides_tag=tag)

    def render(self) -> RenderedPrompt:
        """Render sections (after overrides) into chat messages.

        Raises:
            PromptRenderError: for a placeholder without a value.
        """
        overrides = self._overrides() if self.overrides_store is not None else _NO_OVERRIDES
        if not overrides:
            plan: Any = self.template._render_plan  # type: ignore[attr-defined]  # __post_init__
            if plan is None:  # not made yet
                plan = _plan_of(self.template)
            if plan:  # False: the template cannot have one
                return plan.render(self)  # type: ignore[no-any-return]  # a _RenderPlan
        applied: list[str] = []
        parts: list[tuple[str, str]] = []
        for section in self.template.sections:
            body = section.template
            override = overrides.get(section.key)
            if override is not None:
                if override.expected_hash == section_hash(section.template):
                    _check_placeholders(section, override.body)
                    body = override.body
                    applied.append(section.key)
                else:
                    warnings.warn(
                        f"prompt {self.name}: override for section {section.key!r} (tag "
                        f"{self.overrides_tag!r}) was written for an older text; ignored",
                        StaleOverrideWarning,
                        stacklevel=2,
                    )
            text = self._fill(section, body)
            rendered = f"## {section.title}\n\n{text}" if section.title else text
            parts.append((section.role, rendered.strip()))
        return RenderedPrompt(
            messages=_merge(parts),
            tools=tuple(self.template.tools),
            output_type=self.template.output_type,
            applied_overrides=tuple(applied),
        )

    def _overrides(self) -> Mapping[str, Any]:
        if self.overrides_store is None:
            return _NO_OVERRIDES
        return self.overrides_store.resolve(self.template.ns, self.template.key, self.overrides_tag)

    def _fill(self, section: MarkdownSection[Any], body: str) -> str:
        template, names = _compiled(body)
        params_type = section.params_type
        if params_type is not None:
            bound = None
            for p in reversed(self.params):  # the latest bound wins
                if isinstance(p, params_type):
                    bound = p
                    break
            if bound is None:
                if not names:
                    return body
                raise PromptRenderError(
                    f"prompt {self.name}: section {section.key!r} needs "
                    f"{params_type.__name__} params; call bind() with one",
                )
            fields = _field_names(cast(Any, type(bound)))
            source: Mapping[str, Any] = {n: getattr(bound, n) for n in names if n in fields}
        else:
            source = self.values
        for name in names:
            if name not in source:
                raise PromptRenderError(
                    f"prompt {self.name}: section {section.key!r} has no value for "
                    f"${name}; bind it with bind({name}=...)",
                )
        if not names and "$" not in body:
            return body  # nothing to substitute (`$$` would still need it)
        return template.substitute({name: str(source[name]) for name in names})


_NO_OVERRIDES: Mapping[str, Any] = MappingProxyType({})
"""The overrides of a prompt without an overrides store (none; shared, read-only)."""


def _merge(parts: list[tuple[str, str]]) -> tuple[ChatMessage, ...]:
    merged: list[tuple[str, list[str]]] = []
    for role, text in parts:
        if merged and merged[-1][0] == role:
            merged[-1][1].append(text)
        else:
            merged.append((role, [text]))
    return tuple(
        ChatMessage(role="system" if role == "system" else "user", content="\n\n".join(texts))
        for role, texts in merged
    )


class _Fill:
    """How one section with placeholders renders: its literal text around each name.

    `literals[0] + str(value of names[0]) + literals[1] + ...` is what
    `string.Template(body).substitute(...)` makes of the body (`$$` already turned into
    `$` in the literals), so a render joins strings instead of running a regex
    substitution per section per sample.
    """

    __slots__ = ("body", "head", "literals", "name", "names", "params_type", "prefix", "section")

    def __init__(
        self, section: MarkdownSection[Any], literals: tuple[str, ...], names: tuple[str, ...]
    ) -> None:
        self.section = section
        self.params_type = section.params_type
        self.body = section.template
        self.literals = literals
        self.names = names
        self.name = names[0] if len(names) == 1 else None  # the common case: one placeholder
        self.prefix = f"## {section.title}\n\n" if section.title else ""
        self.head = self.prefix + literals[0]

    def text(self, prompt: Prompt[Any]) -> str:
        """The section rendered for `prompt`, as `Prompt.render` renders it."""
        params_type, name = self.params_type, self.name
        if params_type is not None:
            for p in reversed(prompt.params):  # the latest bound wins
                if isinstance(p, params_type):
                    if name is not None:
                        return (self.head + str(getattr(p, name)) + self.literals[1]).strip()
                    values = [getattr(p, n) for n in self.names]
                    break
            else:  # no params bound: `_fill` says what is missing
                return self._unfilled(prompt)
        else:
            source = prompt.values
            if not all(n in source for n in self.names):
                return self._unfilled(prompt)
            values = [source[n] for n in self.names]
        out = [self.head]
        for value, literal in zip(values, self.literals[1:], strict=True):
            out.append(str(value))
            out.append(literal)
        return "".join(out).strip()

    def _unfilled(self, prompt: Prompt[Any]) -> str:
        return f"{self.prefix}{prompt._fill(self.section, self.body)}".strip()


def _split(body: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """`body`'s literal text around each placeholder, and the placeholders' names.

    None for a body `string.Template` would reject (a `$` not followed by a name).
    """
    literals: list[str] = []
    names: list[str] = []
    current: list[str] = []
    position = 0
    for match in string.Template.pattern.finditer(body):
        current.append(body[position : match.start()])
        position = match.end()
        if match.group("escaped") is not None:
            current.append("$")
            continue
        name = match.group("named") or match.group("braced")
        if name is None:
            return None
        literals.append("".join(current))
        names.append(name)
        current = []
    current.append(body[position:])
    literals.append("".join(current))
    return tuple(literals), tuple(names)


class _RenderPlan:
    """A template rendered once as far as it can be: what changes per `Prompt` is filled in.

    Made by the first render of a template without overrides and kept on the template:
    the messages built from fixed text only are made once and shared (a `ChatMessage`
    is immutable); the others join their fixed sections' text with the sections that
    have placeholders (`_Fill`). The result is the `RenderedPrompt` the section-by-section
    render gives, which a test checks.
    """

    __slots__ = ("fixed", "last", "messages", "output_type", "tools")

    def __init__(self, template: PromptTemplate[Any], parts: list[tuple[str, str | _Fill]]) -> None:
        merged: list[tuple[str, list[str | _Fill]]] = []
        for role, part in parts:
            if merged and merged[-1][0] == role:
                merged[-1][1].append(part)
            else:
                merged.append((role, [part]))
        self.messages: tuple[ChatMessage | _FilledMessage, ...] = tuple(
            _fixed_message(role, texts) for role, texts in merged
        )
        self.tools = tuple(template.tools)
        self.output_type = template.output_type
        # The common shape, rendered without a loop: fixed messages, then one with
        # placeholders (a system prompt, then the user's question).
        *fixed, last = self.messages or (None,)
        self.fixed = tuple(m for m in fixed if isinstance(m, ChatMessage))
        simple = isinstance(last, _FilledMessage) and len(self.fixed) == len(fixed)
        self.last = last if simple and isinstance(last, _FilledMessage) else None

    def render(self, prompt: Prompt[Any]) -> RenderedPrompt:
        last = self.last
        if last is not None:
            messages = (*self.fixed, last.make(prompt))
        else:
            made = [m.make(prompt) if isinstance(m, _FilledMessage) else m for m in self.messages]
            messages = tuple(made)
        return RenderedPrompt(messages=messages, tools=self.tools, output_type=self.output_type)


class _FilledMessage:
    """A message of the plan with placeholders: its fixed sections' text and its `_Fill`s."""

    __slots__ = ("fill", "parts", "role")

    def __init__(self, role: Literal["system", "user"], parts: tuple[str | _Fill, ...]) -> None:
        self.role = role
        self.parts = parts
        # One section with placeholders and nothing else: its text is the message's.
        only = parts[0] if len(parts) == 1 else None
        self.fill = only if isinstance(only, _Fill) else None

    def make(self, prompt: Prompt[Any]) -> ChatMessage:
        fill = self.fill
        if fill is not None:
            content = fill.text(prompt)
        else:
            texts = [part if isinstance(part, str) else part.text(prompt) for part in self.parts]
            content = "\n\n".join(texts)
        return ChatMessage(role=self.role, content=content)


def _fixed_message(role: str, parts: list[str | _Fill]) -> ChatMessage | _FilledMessage:
    chat_role: Literal["system", "user"] = "system" if role == "system" else "user"
    if all(type(part) is str for part in parts):
        return ChatMessage(role=chat_role, content="\n\n".join(cast(list[str], parts)))
    return _FilledMessage(chat_role, tuple(parts))


def _plan_of(template: PromptTemplate[Any]) -> _RenderPlan | None:
    """The template's render plan (made on first use); None when it cannot have one."""
    plan: Any = template._render_plan  # type: ignore[attr-defined]  # None, False or a plan
    if plan is None:  # two threads may both make one: either serves
        plan = _make_plan(template) or False
        object.__setattr__(template, "_render_plan", plan)
    return cast("_RenderPlan | None", plan or None)


def _make_plan(template: PromptTemplate[Any]) -> _RenderPlan | None:
    parts: list[tuple[str, str | _Fill]] = []
    for section in template.sections:
        body = section.template
        split = _split(body)
        if split is None:  # `string.Template` rejects it: the section-by-section render
            return None  # raises what it raises
        if not split[1] and "$" not in body:
            title = f"## {section.title}\n\n" if section.title else ""
            parts.append((section.role, f"{title}{body}".strip()))
        else:
            parts.append((section.role, _Fill(section, *split)))
    return _RenderPlan(template, parts)
