"""Bulk imports and exports pause the cycle collector and restore it as it was."""

from __future__ import annotations

import gc
import threading

from leanloop.database.bulk import without_cycle_collection
from leanloop.database.loader import import_dataset


def test_the_collector_is_paused_inside_and_restored_after(db, sample_dir, monkeypatch):
    seen = []

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return import_dataset(*args, **kwargs)

    monkeypatch.setattr("leanloop.database.dynamic.import_dataset", spy)
    assert gc.isenabled()
    db.import_leandojo(sample_dir)
    assert seen == [False] and gc.isenabled()


def test_nested_and_concurrent_blocks_resume_once_at_the_end():
    inner_done = threading.Event()
    with without_cycle_collection():

        def other():
            with without_cycle_collection():
                assert not gc.isenabled()
            inner_done.set()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert inner_done.is_set() and not gc.isenabled()  # the outer block still runs
    assert gc.isenabled()
    gc.disable()
    try:
        with without_cycle_collection():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_an_error_inside_still_restores_the_collector():
    try:
        with without_cycle_collection():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()
