"""The newest checkpoint is mirrored at the top of a trainer's output directory."""

from __future__ import annotations

from leanloop.trainer.base import MIRROR_FILE, mirror_checkpoint


def test_mirror_follows_the_newest_checkpoint(tmp_path):
    out = tmp_path / "out"
    first, second = out / "repo00-a", out / "repo01-b"
    for directory in (first, second):
        (directory / "sub").mkdir(parents=True)
    (first / "config.json").write_text("first")
    (first / "model.safetensors").write_text("full model")
    (second / "config.json").write_text("second")
    (second / "adapter_model.safetensors").write_text("adapter")
    (second / "sub" / "inner.txt").write_text("not mirrored")
    (out / "notes.txt").write_text("the user's")

    mirror_checkpoint(first, out)
    assert (out / "config.json").read_text() == "first"
    assert (out / "model.safetensors").samefile(first / "model.safetensors")

    mirror_checkpoint(second, out)
    assert (out / "config.json").read_text() == "second"
    assert (out / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists()  # left over from the older checkpoint
    assert (first / "model.safetensors").read_text() == "full model"  # the checkpoint keeps it
    assert not (out / "inner.txt").exists() and not (out / "sub").exists()
    assert (out / "notes.txt").read_text() == "the user's"  # never mirrored, never removed
    assert sorted((out / MIRROR_FILE).read_text().split()) == [
        "adapter_model.safetensors",
        "config.json",
    ]
    assert not list(out.glob(".*.mirror"))
