"""Command-line parsers derived from config dataclasses: each flag, default and help text is written once.

A command's settings are one frozen dataclass. Each field declares its help text with `option`, and the
flags follow from the fields (the shape of TRL's scripts, without their heavy dependencies):

- ``field_name`` → ``--field-name`` (or ``option(flag=...)``); ``option(positional=True)`` → a positional;
- ``bool`` → a switch: ``--x`` for a field that defaults to False, ``--no-x`` for one that defaults to True;
- ``Literal[...]`` → its values are the choices; ``X | None`` → an optional X;
- ``tuple[str, ...]`` → a comma-separated list (``--levels easy,medium``), or a repeatable flag with
  ``option(repeat=True)`` (``--engine-arg a=1 --engine-arg b=2``), or ``nargs="+"`` for a positional.

A config may inherit a field its command sets itself (`perrecbench sweep` sets ``k`` per grid point): the
class names it in ``replaced = {"k": "--ks"}`` and the field's flag or key is refused, naming the flag to use.

Every command also takes ``--config FILE.yaml``: a mapping of field names (underscores or dashes) to values,
which flags override. Unknown keys are an error that lists the valid ones, and ``--help`` shows each default.
`coerce` is the one place where text from a flag, a YAML file or a ``KEY=VALUE`` engine option becomes a
typed value.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, Literal, NoReturn, TypeVar

from perrec_eval import progress
from perrec_eval.errors import ConfigError

T = TypeVar("T")

_CONFIG_FILE = "config_file"
_NONE = type(None)


def option(
    help: str,
    *,
    default: Any = dataclasses.MISSING,
    flag: str | None = None,
    positional: bool = False,
    repeat: bool = False,
    metavar: str | None = None,
    shown: str | None = None,
) -> Any:
    """A dataclass field that carries its command-line help (and, rarely, how its flag is spelled).

    Args:
        help: one or two sentences; the default is appended by the parser.
        default: the field's default; none means the flag is required (unless ``--config`` gives it).
        flag: the flag's spelling when ``--field-name`` does not fit (e.g. ``--engine-arg``).
        positional: a positional argument instead of a flag.
        repeat: a ``tuple[str, ...]`` field given as a repeatable flag instead of a comma-separated list.
        metavar: the placeholder shown in ``--help``.
        shown: the default as ``--help`` states it, when the field's default (often None) only means
            "decided from the other settings" (e.g. ``pointwise,pairwise,listwise; baselines: pointwise``).
    """
    metadata = {
        "help": help,
        "flag": flag,
        "positional": positional,
        "repeat": repeat,
        "metavar": metavar,
        "shown": shown,
    }
    if isinstance(default, list | dict | set):
        raise TypeError("use a tuple (immutable) as the default of a config field")
    return dataclasses.field(default=default, metadata=metadata)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(tp) if arg is not _NONE]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def describe(tp: Any) -> str:
    """A short human name of a field type, for error messages.

    >>> describe(int | None), describe(Literal["a", "b"]), describe(tuple[str, ...])
    ('int or none', "one of 'a', 'b'", 'list of str')
    """
    inner, optional = _unwrap_optional(tp)
    if typing.get_origin(inner) is Literal:
        text = "one of " + ", ".join(repr(value) for value in typing.get_args(inner))
    elif _is_tuple(inner):
        text = "list of " + describe(typing.get_args(inner)[0])
    else:
        text = getattr(inner, "__name__", str(inner))
    return text + (" or none" if optional else "")


def coerce(name: str, tp: Any, value: Any) -> Any:
    """Turn `value` (text from a flag or ``KEY=VALUE``, or a YAML scalar or list) into a value of type `tp`.

    Args:
        name: what the value is for, named in errors (e.g. ``--k`` or ``batch_size``).
        tp: the field's type annotation (resolved).
        value: the raw value.

    Returns:
        The typed value (tuples for list fields).

    Raises:
        ConfigError: the value does not fit the type; the message says what is expected.

    >>> coerce("k", int, "4"), coerce("levels", tuple[str, ...], "easy, hard"), coerce("x", bool, "yes")
    (4, ('easy', 'hard'), True)
    >>> coerce("m", int | None, "none") is None
    True
    """
    inner, optional = _unwrap_optional(tp)
    if value is None or (optional and isinstance(value, str) and value.strip().lower() in ("none", "null")):
        if optional:
            return None
        raise ConfigError(f"{name} cannot be empty: expected {describe(tp)}")
    try:
        return _coerce(inner, value)
    except _Unfit as err:
        raise ConfigError(f"{name}={value!r} is not {describe(tp)}: {err}") from err
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{name}={value!r} is not {describe(tp)}") from err


class _Unfit(ValueError):
    """A value of the right type that no setting takes (the message says why)."""


def _text(value: str) -> str:
    """`value`, unless it holds a control character (a line break splits a report's row, a log line), a
    bidirectional control, or bytes that are not UTF-8 (a shell passes them as lone surrogates, which no
    file can hold).

    >>> _text("smollm2 135m")
    'smollm2 135m'
    >>> _text("a\\nb")
    Traceback (most recent call last):
    ...
    perrec_eval.cliconfig._Unfit: it holds a control character (U+000A): write it on one line
    """
    for char in value:
        if unicodedata.category(char) == "Cc":
            raise _Unfit(f"it holds a control character (U+{ord(char):04X}): write it on one line")
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise _Unfit("it is not UTF-8 text: write it in UTF-8")
        if char in _BIDI_CONTROLS:
            raise _Unfit(
                f"it holds a bidirectional control character (U+{ord(char):04X}), which shows the text "
                "around it reversed in every table: leave it out"
            )
    return value


# Embeddings, overrides and isolates: they reorder the text that follows them, in a report's tables as in
# a terminal ("gpt\u202eevil" shows as "gptlive"); the marks (U+200E, U+200F) move nothing.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _coerce(tp: Any, value: Any) -> Any:
    if typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ValueError(value)
        return value
    if _is_tuple(tp):
        item = typing.get_args(tp)[0]
        parts = value.split(",") if isinstance(value, str) else value
        if not isinstance(parts, list | tuple):
            raise TypeError(value)
        # "a,,b" and a trailing comma drop their empty parts; an empty value of a repeated flag (--base-url
        # "$UNSET") stays, for the option to refuse
        kept = [part for part in parts if part != "" or not isinstance(value, str)]
        return tuple(_coerce(item, part.strip() if isinstance(part, str) else part) for part in kept)
    if tp is bool:
        if isinstance(value, bool):
            return value
        words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
        if isinstance(value, str) and value.strip().lower() in words:
            return words[value.strip().lower()]
        raise ValueError(value)
    if tp is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        return int(value)
    if tp is float:
        if isinstance(value, bool):
            raise ValueError(value)
        number = float(value)
        if not math.isfinite(number):  # nan passes every `<` check, inf is no JSON a server takes
            raise _Unfit("write a finite number")
        return number
    if tp is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise TypeError(value)
        return _text(str(value))
    if tp is Path:
        if not isinstance(value, str | PurePath):
            raise TypeError(value)
        return Path(_text(str(value)))
    if tp is Any:
        return value
    raise TypeError(f"no command-line form for fields of type {tp!r}")


def _flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _has_default(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING  # (`option` fields have no default_factory)


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(part) for part in value) if value else "none"
    return "none" if value is None else str(value)


def _declared_by(cls: type) -> dict[str, type]:
    """Which class of `cls`'s hierarchy declares each field (the most derived one first)."""
    owner: dict[str, type] = {}
    for klass in cls.__mro__:
        for name in getattr(klass, "__annotations__", {}):
            owner.setdefault(name, klass)
    return owner


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one argument per field of the dataclass `cls`, and ``--config FILE.yaml``.

    The fields `cls` declares itself come first; fields inherited from a base config (such as the engine
    settings shared by several commands) follow in a group titled by that base's docstring.
    """
    hints = typing.get_type_hints(cls)
    owner = _declared_by(cls)
    fields = dataclasses.fields(cls)
    targets: dict[type, Any] = {cls: parser}
    hidden = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
    for field in sorted(fields, key=lambda f: owner[f.name] is not cls):
        if field.name in getattr(cls, "replaced", {}):  # refused when given (exact: `--k` is not `--ks`)
            parser.add_argument(_flag(field), dest=field.name, **hidden)
            continue
        if field.name == getattr(cls, "sections_field", None):  # set in --config only (`_load_yaml`)
            continue
        klass = owner[field.name]
        if klass not in targets:
            title = (klass.__doc__ or klass.__name__).strip().splitlines()[0].rstrip(".")
            targets[klass] = parser.add_argument_group(title)
        _add_field(targets[klass], cls, field, hints[field.name])
    parser.add_argument(
        "--config",
        dest=_CONFIG_FILE,
        default=None,
        metavar="FILE.yaml",
        help="read these settings from a YAML mapping (keys as the flags without dashes); flags override it",
    )


def _add_field(parser: Any, cls: type, field: dataclasses.Field, hint: Any) -> None:
    if "help" not in field.metadata:
        raise TypeError(f"{cls.__name__}.{field.name} has no help text: declare it with option(...)")
    tp, _ = _unwrap_optional(hint)
    meta = field.metadata
    text = meta["help"].replace("%", "%%")  # argparse formats help with %: a bare one garbles the text
    kwargs: dict[str, Any] = {"default": argparse.SUPPRESS}
    if meta["positional"]:
        kwargs["metavar"] = meta["metavar"] or field.name.upper()
        if _is_tuple(tp):
            kwargs["nargs"] = "+"
        elif field.default is not dataclasses.MISSING:  # an optional positional
            kwargs["nargs"] = "?"
        parser.add_argument(field.name, help=text, **kwargs)
        return
    kwargs["dest"] = field.name
    if tp is bool:
        # A switch is off unless given: `--x` sets a False default to True, `--no-x` a True default to False.
        on_by_default = field.default is True
        flag = "--no-" + field.name.replace("_", "-") if on_by_default else _flag(field)
        action = "store_false" if on_by_default else "store_true"
        if on_by_default:  # the help says what the setting does, and that this flag turns it off
            text += f" (default: on; this flag turns it off, as does {field.name}: false in --config)"
        else:
            text += " (default: off)"
        parser.add_argument(flag, help=text, action=action, **kwargs)
        return
    if typing.get_origin(tp) is Literal:
        kwargs["choices"] = typing.get_args(tp)
    if meta["repeat"]:
        kwargs["action"] = "append"
    elif _is_tuple(tp) and "comma-separated" not in text:  # said once, where the text says it itself too
        text += " (comma-separated)"
    if meta["metavar"]:
        kwargs["metavar"] = meta["metavar"]
    shown = meta.get("shown") or (_show(field.default) if _has_default(field) else None)
    suffix = f" (default: {shown})" if shown else " (required)"
    if shown and "(default: " in text:  # the text names its default in its own words ("(default: all)")
        suffix = ""
    parser.add_argument(_flag(field), help=text + suffix, **kwargs)


# Deeper YAML than any settings file needs: PyYAML composes nodes recursively (RecursionError at ~1000).
MAX_YAML_DEPTH = 32


def safe_yaml(text: str) -> Any:
    """`yaml.safe_load` made safe for settings files: no aliases, no duplicate keys, bounded nesting.

    Aliases (``*name``) nested a few times expand to billions of values; a key given twice would silently
    keep the last value; nesting deeper than `MAX_YAML_DEPTH` is refused before PyYAML's recursion fails.

    Raises:
        yaml.YAMLError: invalid YAML, an alias, a duplicate key or too deep a nesting (the message says why).

    >>> safe_yaml("a: [1, 2]")
    {'a': [1, 2]}
    """
    import yaml

    class SettingsLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    "aliases (*name) are not allowed: write the values out",
                    self.peek_event().start_mark,
                )
            if self.depth >= MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_YAML_DEPTH} levels: settings are a flat mapping",
                    self.peek_event().start_mark,
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: list[Any] = []
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=True)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping",
                            None,
                            f"found the key {key!r} twice: give each setting once",
                            key_node.start_mark,
                        )
                    seen.append(key)
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=SettingsLoader)  # noqa: S506 (a SafeLoader)


def load_settings(path: str | Path, flag: str = "--config") -> Any:
    """The YAML settings file `path`, read with `safe_yaml`: every config file goes through this.

    Args:
        path: the file.
        flag: how the user named it, for the error (``--config``).

    Returns:
        The parsed document (None for an empty file).

    Raises:
        ConfigError: one line: the file is missing or unreadable, not UTF-8 text, or not valid settings YAML.
    """
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{flag} {path}: no such file; pass a YAML file of settings")
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as err:
        raise ConfigError(
            f"{flag} {path} cannot be read ({err.strerror or err}): check its permissions"
        ) from err
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{flag} {path} is not UTF-8 text ({err.reason} at byte {err.start}): save it as UTF-8 YAML"
        ) from err
    try:
        return safe_yaml(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{flag} {path} is not valid YAML: {' '.join(str(err).split())[:300]}") from err
    except RecursionError as err:  # the parser recurses once per nesting level
        raise ConfigError(f"{flag} {path} nests too deep: a config is a flat mapping of settings") from err


def _load_yaml(path: str, cls: type) -> dict[str, Any]:
    data = load_settings(path)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"--config {path} must be a mapping of settings, got {type(data).__name__}")
    names = {field.name for field in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    # A config may gather named sections (a suite's per-family settings) into one field: `sections_field`,
    # whose keys are `section_names()`.
    gather = getattr(cls, "sections_field", None)
    sections = {name.replace("-", "_"): name for name in cls.section_names()} if gather else {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name in sections:
            values.setdefault(gather, {})[sections[name]] = value
            continue
        if name in values:
            raise ConfigError(f"--config {path} gives {name} twice (as {key!r} too): give each setting once")
        values[name] = value
    if "progress" in values and not coerce(f"progress in {path}", bool, values.pop("progress")):
        progress.disable()  # the process-wide switch, as --no-progress (once a setting of each command)
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(
            f"--config {path}: unknown setting(s) {', '.join(unknown)}; "
            f"valid ones: {', '.join(sorted(names))}"
        )
    return values


def from_namespace(cls: type[T], args: argparse.Namespace) -> T:
    """The config of `cls` from parsed arguments: dataclass defaults, then ``--config``, then the flags."""
    hints = typing.get_type_hints(cls)
    replaced = getattr(cls, "replaced", {})
    values: dict[str, Any] = {}
    config_file = getattr(args, _CONFIG_FILE, None)
    if config_file:
        for name, raw in _load_yaml(config_file, cls).items():
            values[name] = coerce(f"{name} in {config_file}", hints[name], raw)
    for field in dataclasses.fields(cls):
        if hasattr(args, field.name):
            values[field.name] = coerce(_flag(field), hints[field.name], getattr(args, field.name))
        if field.name in values and field.name in replaced:
            raise ConfigError(f"{_flag(field)} is not a setting of this command: use {replaced[field.name]}")
    missing = [f for f in dataclasses.fields(cls) if not _has_default(f) and f.name not in values]
    if missing:
        flags = ", ".join(_flag(f) for f in missing)
        raise ConfigError(f"missing {flags}: pass it as a flag or as a key of --config FILE.yaml")
    return cls(**values)


def options_from_pairs(cls: type[T], pairs: Sequence[str], where: str, **given: Any) -> T:
    """Build the options dataclass `cls` from ``KEY=VALUE`` strings (typed by its fields) and `given` values.

    Args:
        cls: a dataclass (e.g. an engine's options).
        pairs: ``KEY=VALUE`` strings; later ones win.
        where: what the options are for, named in errors (e.g. ``the 'hf' engine``).
        **given: values that are already typed (None values are ignored).

    Raises:
        ConfigError: a malformed pair, an unknown key (the message lists the valid ones) or a bad value.
    """
    hints = typing.get_type_hints(cls)
    names = [field.name for field in dataclasses.fields(cls)]
    values = {key: value for key, value in given.items() if value is not None}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"engine option {pair!r} is not KEY=VALUE, e.g. batch_size=4")
        if key not in names:
            raise ConfigError(f"{where} has no option {key!r}; valid ones: {', '.join(names) or 'none'}")
        values[key] = coerce(key, hints[key], raw)
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{where} has no option {unknown[0]!r}; valid ones: {', '.join(names) or 'none'}")
    try:
        return cls(**values)
    except TypeError as err:
        raise ConfigError(f"{where}: {err}") from err


Handler = Callable[[Any], int]


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    cls: type,
    handler: Handler,
    *,
    help: str,
    description: str | None = None,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """Register subcommand `name`: its flags come from `cls`, and `handler(config)` runs it."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description or help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser, cls)
    add_common_arguments(parser)
    parser.set_defaults(handler=handler, config_cls=cls)
    return parser


class OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block above it) that says where the usage is; its
    subcommands' parsers are of its class too."""

    def error(self, message: str) -> NoReturn:
        if message.endswith("expected one argument"):  # `--repo $MODEL` with MODEL unset, typically
            message += " (is a shell variable in the command empty?)"
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """`-v/--verbose`, `--debug` and `--no-progress`, accepted before or after the subcommand."""
    group = parser.add_argument_group("common options")
    quiet = argparse.SUPPRESS  # a subcommand's default must not overwrite the same flag given before it
    group.add_argument(
        "-v", "--verbose", action="store_true", default=quiet, help="debug logging (default: off)"
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=quiet,
        help="show the full traceback of an error (default: off)",
    )
    group.add_argument(
        "--no-progress",
        dest="no_progress",
        action="store_true",
        default=quiet,
        help="hide progress bars (default: off)",
    )


def check_choices(config: Any) -> None:
    """Refuse a value outside its field's `Literal` choices (set from Python; the parser offers no other)."""
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        tp, value = _unwrap_optional(hints[field.name])[0], getattr(config, field.name)
        if typing.get_origin(tp) is Literal and value is not None and value not in typing.get_args(tp):
            choices = " or ".join(map(str, typing.get_args(tp)))
            raise ConfigError(f"{_flag(field)} must be {choices}, got {value!r}")


# The task family named by --task on this command line (None: the default), set by the CLI before it builds
# its parser: a family may give a command its own options (`for_task`).
_selected_task: str | None = None


def select_task(
    argv: Sequence[str], parser: Callable[[], argparse.ArgumentParser] | None = None
) -> list[str]:
    """Remember the family that ``--task NAME`` (or ``--task=NAME``) of `argv` names, before parsing; return
    `argv`, with ``--task NAME`` added where it names none and a folder it passes does (a run folder's
    run.json, a benchmark folder's manifest.json: `folder_task`). Only ``--data`` and the command's
    positional arguments are read as folders, never another option's value (`parser` makes the command
    line's parser, whose switches take none).

    Raises:
        ConfigError: an unknown family, or a --task that the folder contradicts.
    """
    global _selected_task
    _selected_task = None
    for i, arg in enumerate(argv):
        if arg == "--task" and i + 1 < len(argv):
            _selected_task = argv[i + 1]
        elif arg.startswith("--task="):
            _selected_task = arg.partition("=")[2]
    if _selected_task is not None:
        from perrec_eval import registry

        if registry.is_suite_spec(_selected_task):
            registry.parse_tasks(_selected_task)  # its families must be known
            return list(argv)
        registry.check_name(_selected_task)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    rest = argv[argv.index(command) + 1 :] if command is not None else []
    subcommand = {"sft": ["data"], "push": ["results"]}.get(command or "")
    inferring = ("evaluate", "score", "profiles", "sft", "push")
    if command not in inferring or (subcommand and rest[:1] != subcommand):
        return list(argv)
    found = _folder_task(rest[len(subcommand or ()) :], switches(parser()) if parser else frozenset())
    if found is None:
        return list(argv)
    folder, task = found
    if _selected_task is None:
        from perrec_eval.registry import DEFAULT_TASK

        _selected_task = task
        return list(argv) if task == DEFAULT_TASK else [*argv, "--task", task]
    if _selected_task != task:
        raise ConfigError(f"{folder} is {task}'s (--task {_selected_task} given): pass --task {task} or none")
    return list(argv)


def _folder_task(args: Sequence[str], switches: frozenset[str]) -> tuple[str, str] | None:
    """The first folder among `args` (a command's arguments) that names its family: (the folder, its family).

    Read: the value of ``--data`` and the positional arguments (a run folder); not the value of any other
    option (``--label NAME``, ``--per-query ''``), which an option that is not one of `switches` takes.

    >>> _folder_task(["--label", "/", "--out", "/", "x"], frozenset()) is None
    True
    """
    for i, arg in enumerate(args):
        before = args[i - 1] if i else ""
        if arg.startswith("--data="):
            value = arg.partition("=")[2]
        elif before == "--data" or not (
            arg.startswith("-") or (before.startswith("-") and "=" not in before and before not in switches)
        ):
            value = arg
        else:
            continue
        task = folder_task(value) if value else None
        if task is not None:
            return value, task
    return None


def switches(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every option of `parser` and its subcommands' that takes no value (``--overwrite``, ``-v``)."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= switches(sub)
        elif action.option_strings and action.nargs == 0:
            found |= set(action.option_strings)
    return frozenset(found)


def folder_task(path: str) -> str | None:
    """The family of a run folder (its run.json, or the one run in a folder of runs) or a benchmark folder
    (its manifest.json); None for anything else or a file that cannot be read (its command says why)."""
    from pathlib import Path

    from perrec_eval.fileio import loads
    from perrec_eval.registry import DEFAULT_TASK

    folder = Path(path)
    try:
        if not folder.is_dir():
            return None
        runs = [folder] if (folder / "run.json").is_file() else sorted(
            child for child in folder.iterdir() if (child / "run.json").is_file()
        )
        if runs:
            tasks_of = {
                loads((run / "run.json").read_text())["config"].get("task", DEFAULT_TASK) for run in runs
            }
            return tasks_of.pop() if len(tasks_of) == 1 else None
        if (folder / "manifest.json").is_file():
            return loads((folder / "manifest.json").read_text()).get("task", DEFAULT_TASK)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def selected_task() -> str | None:
    """The family `select_task` remembered (None: the command line names none)."""
    return _selected_task


def for_task(command: str, cls: type, handler: Handler) -> tuple[type, Handler]:
    """The config class and handler of `command` for the family on the command line.

    PerRecBench (the default) and any family that runs `command` its own way (`Task.handlers`) keep
    theirs; other families run through the general path (`perrec_eval.registry.default_command`).
    """
    from perrec_eval import registry

    if _selected_task is None or _selected_task == registry.DEFAULT_TASK:
        return cls, handler
    if registry.is_suite_spec(_selected_task):  # `--task all` or NAME,NAME: a list of tasks
        if command == "evaluate":
            return registry.suite_command()
        return cls, registry.refusal(
            _selected_task, command, "a suite evaluates (`perrecbench evaluate --task all`); give one family"
        )
    if _selected_task not in registry.evaluable():
        return cls, registry.refusal(_selected_task, command, "it can be built but declares no Task yet")
    return registry.command_for(registry.get(_selected_task), command, cls, handler)


def check_task(name: str) -> None:
    """Refuse a --task that names no family, in one line listing the families.

    Raises:
        ConfigError: an unknown task.
    """
    from perrec_eval import registry

    registry.get(name)


def one_limit(config: object, name: str) -> None:
    """`--limit` is stored under the family's own name (`name`): run.json records one field, whichever
    spelling gave it, so a run resumes under either.

    Raises:
        ConfigError: both spellings, with different values.
    """
    limit, own = config.limit, getattr(config, name)
    if limit is None:
        return
    if own is not None and own != limit:
        raise ConfigError(f"--limit {limit} and --{name.replace('_', '-')} {own} are one setting: give one")
    object.__setattr__(config, name, limit)
    object.__setattr__(config, "limit", None)


def check_score_input(config: Any, file: str = "FILE.jsonl") -> bool:
    """Refuse a `score` config given a run folder and ``--data``/``--predictions`` both, or neither; return
    whether it scores a predictions file.

    Raises:
        ConfigError: both, or neither, naming what to give.
    """
    external = config.data is not None or config.predictions is not None
    if config.run_dir is not None and external:
        raise ConfigError("give a run folder, or --data and --predictions, not both")
    if config.run_dir is None and (config.data is None or config.predictions is None):
        raise ConfigError(
            f"give a run folder to score again, or --data DIR --predictions {file} to score a file"
        )
    return external


def check_text(flag: str, value: str) -> None:
    """Refuse text with a control character or bytes that are not UTF-8 (set from Python; the parser's
    `coerce` refuses them in every option).

    >>> check_text("--label", "run 1")
    """
    try:
        _text(value)
    except _Unfit as err:
        raise ConfigError(f"{flag}={value!r}: {err}") from err


def check_hub_id(repo: str, flag: str) -> None:
    """Refuse a Hugging Face Hub repository id that is not ORG/NAME as the Hub spells them.

    >>> check_hub_id("org/perrecbench", "--push-to-hub")
    >>> check_hub_id("org/-x", "--push-to-hub")
    Traceback (most recent call last):
    ...
    perrec_eval.errors.ConfigError: --push-to-hub wants ORG/NAME (letters, digits, - _ .), got 'org/-x'
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        valid = repo.count("/") == 1 and validate_repo_id(repo) is None
    except HFValidationError:
        valid = False
    if not valid:
        raise ConfigError(f"{flag} wants ORG/NAME (letters, digits, - _ .), got {repo!r}")


def check_seed(seed: int, flag: str = "--seed") -> None:
    """Refuse a negative seed (numpy's generators take none), before any work is done.

    >>> check_seed(0)
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    perrec_eval.errors.ConfigError: --seed must be an integer >= 0, got -1
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{flag} must be an integer >= 0, got {seed!r}")


def check_once(flag: str, values: tuple[str, ...]) -> None:
    """Refuse a list that names one value twice (``--levels easy,easy`` would score each group twice).

    >>> check_once("--levels", ("easy", "hard"))
    >>> check_once("--levels", ("easy", "easy"))
    Traceback (most recent call last):
    ...
    perrec_eval.errors.ConfigError: --levels lists easy more than once: name each once, e.g. --levels easy
    """
    repeated = [value for value in dict.fromkeys(values) if values.count(value) > 1]
    if repeated:
        raise ConfigError(
            f"{flag} lists {', '.join(repeated)} more than once: name each once, "
            f"e.g. {flag} {','.join(dict.fromkeys(values))}"
        )
