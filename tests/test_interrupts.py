"""A Ctrl-C that lands where Python cannot raise it is raised at the next check."""

from __future__ import annotations

import signal
import weakref

import pytest

from seedvar import interrupts


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch):
    """seedvar's SIGINT handler for the test, pytest's back afterwards."""
    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(interrupts, "_received", False)
    interrupts.catch_interrupts()
    yield
    signal.signal(signal.SIGINT, before)


class Thing:
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_lost_in_a_weakref_callback_is_raised_at_the_next_check(handler):
    interrupts.raise_if_lost()  # nothing pressed yet
    thing = Thing()
    reference = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGINT))
    del thing  # the callback raises KeyboardInterrupt, which Python prints and drops
    assert reference() is None
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_if_lost()


def test_a_ctrl_c_is_raised_where_it_lands(handler):
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_if_lost()  # and stays raised
