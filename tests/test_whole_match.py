"""Names a stranger gives (a target on the command line, a config name in the bot's TOML, a directory
in a mirrored public-inbox) are matched whole: ``$`` also matches before a final newline, so
``re.match(r"^...$")`` took ``mm\\n`` for a directory name. The web's own checks are in
test_web_hostile (HOSTILE_GETS, the bisect form)."""
from __future__ import annotations

import pytest

from ci.bot.inbox import epochs
from toolchains import presets
from toolchains.errors import BuildError
from toolchains.targets import parse


@pytest.mark.parametrize("spec", ["mm\n/page_alloc.o", "mm/page_alloc.o\n/x.o", "mm\n/"])
def test_a_target_with_a_newline_inside_is_refused(spec):
    with pytest.raises(BuildError, match="bad target"):
        parse(spec)


def test_a_target_with_blanks_around_it_is_still_read():
    assert parse("mm/page_alloc.o\n").spec == "mm/page_alloc.o"


def test_a_config_name_with_a_newline_is_unknown(tmp_path):
    (tmp_path / "tiny.config").write_text("# base: tinyconfig\nCONFIG_X=y\n")
    assert presets.load("tiny", tmp_path)[0] == "tinyconfig"
    with pytest.raises(BuildError, match="unknown config"):
        presets.load("tiny\n", tmp_path)


def test_an_inbox_epoch_is_a_whole_directory_name(tmp_path):
    git = tmp_path / "git"
    for name in ("0.git", "1.git\n", "2.git.bak"):
        (git / name).mkdir(parents=True)
    assert epochs(tmp_path) == [(0, git / "0.git")]
