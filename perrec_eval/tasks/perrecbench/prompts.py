"""Prompts as data: the PerRecBench chat messages of PROTOCOL §3–4, rendered from YAML package data.

The exact text lives in `templates/*.yaml` beside this module (`common`, `pointwise`, `pairwise`, `listwise`,
`profile`). Placeholders are `${name}` (`string.Template`), so the literal JSON braces of the prompts need no
escaping. Every string is checked when the files load: a missing or unknown placeholder, a missing or
unknown key, or a missing variant raises `TemplateError` naming the file and the key. `template_info()`
gives each template id with the sha256 of its file, for `run.json`.

Variants (paper Table 2): `default` (zero-shot with profile), `no_profile`, `cot`, `cot_no_profile`. The
chain-of-thought texts are the paper's Appendix E as released (`0ours0_sys_cot.txt`, `0ours0_cot.txt`:
U+2019 apostrophes, line breaks, tabs in the listwise steps); the pairwise CoT keeps the default system
prompt, as the released run did.

Few-shot is orthogonal to the variant: each demonstration becomes a prior user turn (rendered with the same
method and variant) followed by an assistant turn holding its true answer in the required format
(`{"predicted_rating": 4.0}`, `[User A]`, `{"predicted_ranking": [2, 1, 3]}`). With a CoT variant the
demonstration answers carry the final answer only. (The released code instead pasted demonstrations and
answers into the single user message; chat turns keep each model's own template in charge of the turn
boundaries.)

Profile generation (`render_profile`) sends the PROTOCOL §3 template as the only user message and no system
message: the released code does not include the profile-generation call, so its system message is unknown.
"""

from __future__ import annotations

import functools
import hashlib
import math
import numbers
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from perrec_eval.tasks.perrecbench import protocols
from perrec_eval.tasks.perrecbench.records import HistoryItem, Query, UserView
from perrec_eval.tasks.perrecbench.vocabulary import METHODS
from perrec_eval.types import Message

VARIANTS: tuple[str, ...] = ("default", "no_profile", "cot", "cot_no_profile")
TEMPLATE_IDS: tuple[str, ...] = ("common", "pointwise", "pairwise", "listwise", "profile")

# What each template string must contain: exactly these placeholders, no more, no fewer.
_COMMON_FIELDS: dict[str, frozenset[str]] = {
    "author_line": frozenset({"author"}),
    "history_item": frozenset({"title", "author_line", "rating_tag", "rating"}),
    "query": frozenset({"title", "author_line"}),
    "profile_part": frozenset({"profile", "most_common_rating", "avg_rating"}),
}
_METHOD_FIELDS: dict[str, dict[str, frozenset[str]]] = {
    "pointwise": {
        "rating_tag": frozenset(),
        "history_entry": frozenset({"item"}),
        "user_block": frozenset({"profile_part", "history"}),
    },
    "pairwise": {
        "rating_tag": frozenset(),
        "history_entry": frozenset({"item"}),
        "user_block": frozenset({"profile_part", "history"}),
    },
    "listwise": {
        "rating_tag": frozenset({"index"}),
        "history_entry": frozenset({"item"}),
        "user_block": frozenset({"index", "profile_part", "history"}),
    },
}
_USER_MESSAGE_FIELDS: dict[str, frozenset[str]] = {
    "pointwise": frozenset({"user_data", "query"}),
    "pairwise": frozenset({"user_a", "user_b", "query"}),
    "listwise": frozenset({"users", "query"}),
}
_PROFILE_FIELDS: dict[str, frozenset[str]] = {
    "rating_tag": frozenset(),
    "behavior_separator": frozenset(),
    "user": frozenset({"behaviors"}),
}


class TemplateError(ValueError):
    """A template file is missing, malformed, or its placeholders do not match what the renderer fills."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One prompt variant of a method: whether it shows profiles, its system and user message templates."""

    profile: bool
    system: str
    user: str


@dataclass(frozen=True, slots=True)
class MethodTemplates:
    """The templates of one ranking method (pointwise, pairwise or listwise)."""

    rating_tag: str
    history_entry: str
    user_block: str
    variants: Mapping[str, Variant]


@dataclass(frozen=True, slots=True)
class ProfileTemplates:
    """The profile-generation request of PROTOCOL §3."""

    system: str | None
    rating_tag: str
    behavior_separator: str
    user: str


@dataclass(frozen=True, slots=True)
class TemplateSet:
    """Every template, validated, with the sha256 of each file it came from."""

    common: Mapping[str, str]
    methods: Mapping[str, MethodTemplates]
    profile: ProfileTemplates
    sha256: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Demonstration:
    """A few-shot example: a prompt input like `render`'s and its true answer.

    `answer` is a rating in [1, 5] (pointwise), "A" or "B" (pairwise), or the best-first 1-based user
    indices (listwise). Demonstrations come from the held-out split, never from the test groups.
    """

    query: Query
    users: Sequence[UserView]
    answer: float | str | Sequence[int]


def _placeholders(text: str, where: str) -> set[str]:
    template = string.Template(text)
    if not template.is_valid():
        raise TemplateError(
            f"{where}: invalid placeholder syntax; write ${{name}} for a placeholder, $$ for a '$'"
        )
    return set(template.get_identifiers())


def _checked(data: Mapping[str, Any], key: str, expected: frozenset[str], where: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TemplateError(f"{where}: '{key}' must be a string, got {type(value).__name__}")
    found = _placeholders(value, f"{where}: '{key}'")
    unknown, missing = sorted(found - expected), sorted(expected - found)
    if unknown or missing:
        raise TemplateError(
            f"{where}: '{key}' has unknown placeholders {unknown} and lacks {missing}; "
            f"it must use exactly {sorted(expected)}"
        )
    return value


def _check_keys(data: Any, required: set[str], optional: set[str], where: str) -> None:
    if not isinstance(data, Mapping):
        raise TemplateError(f"{where}: expected a mapping of keys, got {type(data).__name__}")
    missing, unknown = sorted(required - set(data)), sorted(set(data) - required - optional)
    if missing or unknown:
        raise TemplateError(
            f"{where}: missing keys {missing}, unknown keys {unknown}; expected {sorted(required)}"
        )


def _parse_common(data: Any, where: str) -> dict[str, str]:
    _check_keys(data, set(_COMMON_FIELDS), {"description"}, where)
    return {key: _checked(data, key, expected, where) for key, expected in _COMMON_FIELDS.items()}


def _parse_method(method: str, data: Any, where: str) -> MethodTemplates:
    fields = _METHOD_FIELDS[method]
    _check_keys(data, {*fields, "variants"}, {"description"}, where)
    if not isinstance(data["variants"], Mapping):
        raise TemplateError(f"{where}: 'variants' must map variant names to {{profile, system, user}}")
    missing = [name for name in VARIANTS if name not in data["variants"]]
    if missing:
        raise TemplateError(f"{where}: missing variants {missing}; every method needs {list(VARIANTS)}")
    variants = {}
    for name, spec in data["variants"].items():
        at = f"{where}: variants.{name}"
        _check_keys(spec, {"profile", "system", "user"}, set(), at)
        if not isinstance(spec["profile"], bool):
            raise TemplateError(f"{at}: 'profile' must be true or false, got {spec['profile']!r}")
        variants[str(name)] = Variant(
            profile=spec["profile"],
            system=_checked(spec, "system", frozenset(), at),
            user=_checked(spec, "user", _USER_MESSAGE_FIELDS[method], at),
        )
    return MethodTemplates(
        rating_tag=_checked(data, "rating_tag", fields["rating_tag"], where),
        history_entry=_checked(data, "history_entry", fields["history_entry"], where),
        user_block=_checked(data, "user_block", fields["user_block"], where),
        variants=variants,
    )


def _parse_profile(data: Any, where: str) -> ProfileTemplates:
    _check_keys(data, {*_PROFILE_FIELDS, "system"}, {"description"}, where)
    system = data["system"]
    if system is not None:
        system = _checked(data, "system", frozenset(), where)
    return ProfileTemplates(
        system=system,
        rating_tag=_checked(data, "rating_tag", _PROFILE_FIELDS["rating_tag"], where),
        behavior_separator=_checked(data, "behavior_separator", _PROFILE_FIELDS["behavior_separator"], where),
        user=_checked(data, "user", _PROFILE_FIELDS["user"], where),
    )


def load_templates(directory: str | Path | Traversable | None = None) -> TemplateSet:
    """Load and validate the five template files (the package's own when `directory` is None).

    Args:
        directory: a folder holding `common.yaml`, `pointwise.yaml`, `pairwise.yaml`, `listwise.yaml`
            and `profile.yaml`.

    Returns:
        The validated templates with each file's sha256.

    Raises:
        TemplateError: a file is missing, is not UTF-8 YAML, or does not match the expected layout.
    """
    if directory is None:
        folder: Path | Traversable = resources.files(__package__) / "templates"
    elif isinstance(directory, Traversable):
        folder = directory
    else:
        folder = Path(directory)
    raw, digests = {}, {}
    for template_id in TEMPLATE_IDS:
        path = folder / f"{template_id}.yaml"
        where = f"template file {path}"
        if not path.is_file():
            needed = [f"{t}.yaml" for t in TEMPLATE_IDS]
            raise TemplateError(f"{where} is missing; a template folder needs {needed}")
        data = path.read_bytes()
        digests[template_id] = hashlib.sha256(data).hexdigest()
        try:
            raw[template_id] = (yaml.safe_load(data.decode("utf-8")), where)
        except (UnicodeDecodeError, yaml.YAMLError) as err:
            raise TemplateError(f"{where} is not valid UTF-8 YAML: {err}") from err
    return TemplateSet(
        common=_parse_common(*raw["common"]),
        methods={method: _parse_method(method, *raw[method]) for method in METHODS},
        profile=_parse_profile(*raw["profile"]),
        sha256=digests,
    )


@functools.cache
def _package_templates() -> TemplateSet:
    return load_templates()


def template_info() -> dict[str, dict[str, Any]]:
    """Each template id with its file name and sha256 (and variants for the methods), for `run.json`."""
    templates = _package_templates()
    info: dict[str, dict[str, Any]] = {}
    for template_id in TEMPLATE_IDS:
        entry: dict[str, Any] = {"file": f"{template_id}.yaml", "sha256": templates.sha256[template_id]}
        if template_id in templates.methods:
            entry["variants"] = sorted(templates.methods[template_id].variants)
        info[template_id] = entry
    return info


def _substitute(template: str, **values: str) -> str:
    return string.Template(template).substitute(values)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _author_line(templates: TemplateSet, item: Query | HistoryItem) -> str:
    return _substitute(templates.common["author_line"], author=item.author) if item.author else ""


def _history_item(templates: TemplateSet, rating_tag: str, item: HistoryItem) -> str:
    return _substitute(
        templates.common["history_item"],
        title=item.title,
        author_line=_author_line(templates, item),
        rating_tag=rating_tag,
        rating=str(float(item.rating)),
    )


def _profile_part(templates: TemplateSet, user: UserView, variant: str, where: str) -> str:
    if not (user.profile or "").strip():
        raise ValueError(
            f"variant {variant!r} shows user profiles but {where} has no profile: load profiles "
            "(`perrecbench profiles`, then --profiles PATH) or use a variant without profiles ('no_profile')"
        )
    return _substitute(
        templates.common["profile_part"],
        profile=user.profile,
        most_common_rating=f"{user.most_common_rating:.1f}",
        avg_rating=f"{user.avg_rating:.1f}",
    )


def _user_block(
    templates: TemplateSet, method: str, variant: str, user: UserView, index: int, where: str
) -> str:
    method_templates = templates.methods[method]
    rating_tag = _substitute(method_templates.rating_tag, index=str(index))
    entries = "".join(
        _substitute(method_templates.history_entry, item=_history_item(templates, rating_tag, item))
        for item in user.history
    )
    use_profile = method_templates.variants[variant].profile
    return _substitute(
        method_templates.user_block,
        index=str(index),
        profile_part=_profile_part(templates, user, variant, where) if use_profile else "",
        history=entries,
    )


def _user_message(
    templates: TemplateSet, method: str, variant: str, query: Query, users: Sequence[UserView], where: str
) -> str:
    count = len(users)
    protocol = protocols.get(method)
    if not protocol.accepts(count):
        raise ValueError(f"{where}{method} needs {protocol.users_per_prompt} users per prompt, got {count}")
    blocks = [
        _user_block(templates, method, variant, user, i, f"{where}users[{i - 1}]")
        for i, user in enumerate(users, start=1)
    ]
    query_block = _substitute(
        templates.common["query"], title=query.title, author_line=_author_line(templates, query)
    )
    template = templates.methods[method].variants[variant].user
    return _substitute(template, **protocol.prompt_fields(blocks), query=query_block)


def _checked_method_variant(templates: TemplateSet, method: str, variant: str) -> None:
    if method not in templates.methods:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    if variant not in templates.methods[method].variants:
        known = sorted(templates.methods[method].variants)
        raise ValueError(f"unknown prompt variant {variant!r} for {method}; choose one of {known}")


def render(
    method: str,
    query: Query,
    users: Sequence[UserView],
    *,
    variant: str = "default",
    demonstrations: Sequence[Demonstration] = (),
) -> list[Message]:
    """The chat messages of one ranking request, exactly as PROTOCOL §4 writes them.

    Args:
        method: pointwise (1 user), pairwise (2 users: A then B) or listwise (2+ users, User1..UserN).
        query: the query item (its title and author are shown).
        users: what the prompt shows of each user: retrieved history (best first) and, for variants with
            profiles, the profile and rating summary.
        variant: default | no_profile | cot | cot_no_profile.
        demonstrations: few-shot examples placed before the request as user/assistant turns.

    Returns:
        `[system, (user, assistant) per demonstration, user]` messages as `{"role", "content"}` dicts.

    >>> from perrec_eval.tasks.perrecbench.records import HistoryItem, Query, UserView
    >>> user = UserView((HistoryItem(None, "Cup", None, 4.0, 0),), most_common_rating=4.0, avg_rating=4.0)
    >>> messages = render("pointwise", Query(None, "Mug"), [user], variant="no_profile")
    >>> print(messages[1]["content"])
    [User History]
    <|The Start of User Data|>
    <BLANKLINE>
    ### Item Title
    Cup
    ### User Rating
    4.0
    <|The End of User Data|>
    <BLANKLINE>
    <BLANKLINE>
    [Query Item Details]
    <|The Start of Query Item Information|>
    ### Item Title
    Mug
    <|The End of Query Item Information|>
    <BLANKLINE>
    Answer:
    """
    templates = _package_templates()
    _checked_method_variant(templates, method, variant)
    system = templates.methods[method].variants[variant].system
    messages: list[Message] = [{"role": "system", "content": system}]
    for i, demo in enumerate(demonstrations):
        if not isinstance(demo, Demonstration):
            raise TypeError(f"demonstrations[{i}] must be a prompts.Demonstration, got {type(demo).__name__}")
        where = f"demonstrations[{i}]."
        content = _user_message(templates, method, variant, demo.query, demo.users, where)
        messages.append({"role": "user", "content": content})
        try:
            answer = protocols.get(method).format_answer(demo.answer, n_users=len(demo.users))
        except ValueError as err:
            raise ValueError(f"{where}answer: {err}") from err
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": _user_message(templates, method, variant, query, users, "")})
    return messages


def render_profile(history: Sequence[HistoryItem]) -> list[Message]:
    """The profile-generation request of PROTOCOL §3 for one user's (already budgeted) history.

    Args:
        history: the items to describe, chronological.

    Returns:
        `[user]` (no system message: the released one is unknown; see the module docstring).

    >>> from perrec_eval.tasks.perrecbench.records import HistoryItem
    >>> messages = render_profile([HistoryItem(None, "Dune", "Frank Herbert", 5.0, 0)])
    >>> print(messages[0]["content"].split("### Task")[0])
    ### User Behavior history
    ### Item Title
    Dune
    ### Item Author
    Frank Herbert
    ### User Rating
    5.0
    <BLANKLINE>
    <BLANKLINE>
    """
    if not history:
        raise ValueError("render_profile needs a non-empty list of history items")
    templates = _package_templates()
    profile = templates.profile
    behaviors = profile.behavior_separator.join(
        _history_item(templates, profile.rating_tag, item) for item in history
    )
    messages: list[Message] = []
    if profile.system is not None:
        messages.append({"role": "system", "content": profile.system})
    messages.append({"role": "user", "content": _substitute(profile.user, behaviors=behaviors)})
    return messages
