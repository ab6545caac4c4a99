"""Flags derived from config dataclasses: types, defaults in --help, --config files, unknown keys."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

import pytest

from perrec_eval.cliconfig import add_arguments, coerce, from_namespace, option, options_from_pairs
from perrec_eval.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class Demo:
    data: str = option("where the data is")
    k: int = option("how many", default=4)
    levels: tuple[Literal["easy", "hard"], ...] = option("which levels", default=("easy", "hard"))
    ratio: float | None = option("a ratio", default=None)
    fast: bool = option("go fast", default=False)
    color: bool = option("colored output", default=True)
    extra: tuple[str, ...] = option("KEY=VALUE", default=(), flag="--extra-arg", repeat=True)


def _parse(argv):
    parser = argparse.ArgumentParser(prog="demo")
    add_arguments(parser, Demo)
    return from_namespace(Demo, parser.parse_args(argv))


def test_flags_follow_the_field_types_and_defaults():
    config = _parse(["--data", "d", "--k", "7", "--levels", "hard", "--fast", "--no-color"])
    assert config == Demo(data="d", k=7, levels=("hard",), fast=True, color=False)
    assert _parse(["--data", "d", "--extra-arg", "a=1", "--extra-arg", "b=2"]).extra == ("a=1", "b=2")


def test_help_shows_every_default_and_marks_required_flags(capsys):
    parser = argparse.ArgumentParser(prog="demo")
    add_arguments(parser, Demo)
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: 4)", "(default: easy,hard)", "(default: none)", "--no-color", "(required)"):
        assert shown in text


def test_a_bad_value_names_the_flag_and_the_expected_type():
    with pytest.raises(ConfigError, match="--k='many' is not int"):
        _parse(["--data", "d", "--k", "many"])
    with pytest.raises(ConfigError, match="--levels"):
        _parse(["--data", "d", "--levels", "easy,medium"])


def test_config_file_gives_values_and_flags_override_them(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: from-file\nk: 9\nlevels: [hard]\n")
    config = _parse(["--config", str(path), "--k", "2"])
    assert config.data == "from-file" and config.k == 2 and config.levels == ("hard",)


def test_config_file_unknown_key_lists_the_valid_ones(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: x\nkk: 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) kk; valid ones: color, data, extra, fast"):
        _parse(["--config", str(path)])


def test_missing_required_value_names_flag_and_config_file():
    with pytest.raises(ConfigError, match="missing --data.*--config"):
        _parse([])


def test_options_from_pairs_types_values_and_lists_valid_keys():
    @dataclass(frozen=True, slots=True)
    class Options:
        batch_size: int = option("batch", default=8)
        device: str | None = option("device", default=None)

    assert options_from_pairs(Options, ["batch_size=4", "device=cpu"], "the 'x' engine") == Options(4, "cpu")
    assert options_from_pairs(Options, [], "x", device=None) == Options()
    with pytest.raises(ConfigError, match="has no option 'size'; valid ones: batch_size, device"):
        options_from_pairs(Options, ["size=4"], "the 'x' engine")
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        options_from_pairs(Options, ["batch_size"], "x")


@pytest.mark.parametrize(
    ("tp", "raw", "expected"),
    [
        (bool, "false", False),
        (int | None, "null", None),
        (float, "0.5", 0.5),
        (tuple[int, ...], [1, "2"], (1, 2)),
    ],
)
def test_coerce_reads_flag_text_and_yaml_values(tp, raw, expected):
    assert coerce("x", tp, raw) == expected


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"data: x\nk: 3\nk: 4\n", "found the key 'k' twice"),
        (b"data: x\nextra: [{a: 1, a: 2}]\n", "found the key 'a' twice"),
        (b"data: x\nk: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than"),
        (b"data: x\nk: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n", "nested deeper than"),
        (b"\xff\xfe k: 4\n", "not UTF-8 text"),
        (b"a: &x [1]\nb: *x\n", "aliases"),
    ],
)
def test_load_settings_refuses_duplicates_depth_and_binary_in_one_line(tmp_path, content, says):
    path = tmp_path / "run.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=says) as err:
        _parse(["--config", str(path)])
    assert "\n" not in str(err.value)


def test_load_settings_refuses_one_setting_spelled_twice(tmp_path):
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Two:
        max_k: int = option("a bound", default=1)

    path = tmp_path / "run.yaml"
    path.write_text("max-k: 1\nmax_k: 2\n")
    parser = argparse.ArgumentParser(prog="two")
    add_arguments(parser, Two)
    with pytest.raises(ConfigError, match="gives max_k twice"):
        from_namespace(Two, parser.parse_args(["--config", str(path)]))


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", float("inf"), float("nan")])
def test_coerce_refuses_non_finite_floats(raw):
    with pytest.raises(ConfigError, match="--ratio=.* is not float or none: write a finite number"):
        if isinstance(raw, str):
            _parse(["--data", "d", f"--ratio={raw}"])
        else:  # a YAML .inf or .nan
            coerce("--ratio", float | None, raw)


@pytest.mark.parametrize("raw", ["a\nb", "tab\there", "bell\x07", "a\x85b"])
def test_coerce_refuses_control_characters_in_text(raw):
    with pytest.raises(ConfigError, match="control character .*: write it on one line"):
        _parse(["--data", raw])
    with pytest.raises(ConfigError, match="control character"):
        _parse(["--data", "d", "--extra-arg", raw])


def test_coerce_refuses_text_that_is_not_utf8():
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        _parse(["--data", "caf\udce9"])  # how a shell passes the byte 0xe9 of a latin-1 name


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"k: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nest"),
        (b"k: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n", "nest"),
        (b"\xff\xfe k: 4", "is not UTF-8 text"),
    ],
)
def test_config_file_deep_or_binary_is_one_line_error(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        _parse(["--config", str(path)])


def test_config_file_unreadable_is_one_line_error(tmp_path, monkeypatch):
    from pathlib import Path

    path = tmp_path / "run.yaml"
    path.write_text("data: d\n")

    def denied(self, *args, **kwargs):  # as root chmod 000 would not stop the read
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(ConfigError, match="cannot be read \\(Permission denied\\)"):
        _parse(["--config", str(path)])
