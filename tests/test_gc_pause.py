"""analyzer.gc_pause: the collector is off inside, back on when the last pause ends, and left
off when it was off before."""
from __future__ import annotations

import gc
import threading

import pytest

from analyzer.gc_pause import paused_gc


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


def test_nested_pauses_enable_once_at_the_end():
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()           # the outer pause is still running
    assert gc.isenabled()


def test_an_error_inside_still_enables():
    with pytest.raises(KeyError):
        with paused_gc():
            raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_threads_overlapping():
    """Thread A pauses, B pauses, A leaves: still off until B leaves."""
    a_in, b_in, a_out, b_go = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with paused_gc():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with paused_gc():
            b_in.set()
            a_out.wait(10)
            seen["after a left"] = gc.isenabled()
            b_go.wait(10)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start(), tb.start()
    a_out.wait(10)
    b_go.set()
    ta.join(10), tb.join(10)
    assert seen == {"after a left": False}
    assert gc.isenabled()
