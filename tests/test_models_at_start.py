"""A model that cannot load is refused by the constructor that names it, in one line naming the
argument, before anything loads and without the hub's retries: a missing checkpoint under a folder
that is here (``out/does-not-exist``, never asked of the hub), and a hub name the hub cannot give
(offline: not in the cache; online: the hub asked once and not answering)."""

from __future__ import annotations

import pytest

from leanloop.errors import DataFormatError
from leanloop.ml import models


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory holding ``out/``, the hub on, its cache empty, and the model loaders
    made to fail the test if anything gets as far as loading."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    monkeypatch.setattr(models, "_HUB_ANSWERS", {})
    monkeypatch.setattr(models, "_ask_hub", lambda name: pytest.fail(f"asked the hub: {name}"))

    def no_loading(*args, **kwargs):
        pytest.fail("a model was loaded")

    import leanloop.ml.causal as causal
    import leanloop.ml.pretrained as pretrained

    monkeypatch.setattr(causal, "load_causal_lm", no_loading)
    monkeypatch.setattr(pretrained, "load_pretrained", no_loading)
    return tmp_path


def constructors(missing: str):
    """Each constructor that names a model, given ``missing``, and what it calls the argument."""
    from leanloop.prover.hf import HFProver
    from leanloop.trainer.grpo import GRPOTrainer
    from leanloop.trainer.progress import ProgressTrainer
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig
    from leanloop.trainer.sft import SFTTrainer

    def rows():
        path = models.Path("rows.jsonl")
        path.write_text('{"goal": "g", "tactic": "t", "steps_remaining": 1}\n')
        return path

    return [
        ("SFTTrainer", "model_name", lambda: SFTTrainer(missing, output_dir="o")),
        ("GRPOTrainer", "model_name", lambda: GRPOTrainer(missing, len, output_dir="o")),
        (
            "RetrievalTrainer",
            "model_name",
            lambda: RetrievalTrainer(TrainingConfig(model_name=missing, output_dir="o")),
        ),
        ("ProgressTrainer", "model_name", lambda: ProgressTrainer(rows(), missing)),
        ("HFProver", "ckpt_path", lambda: HFProver(missing)),
    ]


def test_a_missing_local_checkpoint_is_refused_by_every_constructor(here):
    for source, field, build in constructors("out/does-not-exist"):
        with pytest.raises(DataFormatError) as caught:
            build()
        assert caught.value.message == (
            f"{source}, field '{field}': 'out/does-not-exist' does not exist and is not a "
            "packaged model; out/ is a folder here, so this names a local path"
        ), source
        assert "\n" not in str(caught.value)


def test_a_hub_that_does_not_answer_is_refused_at_once(here, monkeypatch):
    asked: list[str] = []

    def unreachable(name: str) -> str:
        asked.append(name)
        return "the Hugging Face hub cannot be reached ([Errno -2] Name or service not known)"

    monkeypatch.setattr(models, "_ask_hub", unreachable)
    for source, field, build in constructors("someone/prover"):
        with pytest.raises(DataFormatError) as caught:
            build()
        assert caught.value.message == (
            f"{source}, field '{field}': 'someone/prover' is no local path, no packaged model, "
            "and not in the Hugging Face cache; the Hugging Face hub cannot be reached ([Errno "
            "-2] Name or service not known)"
        ), source
    assert asked == ["someone/prover"]  # once in the process, whoever asks


def test_offline_a_hub_name_not_in_the_cache_is_refused_by_every_constructor(here, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for source, field, build in constructors("someone/prover"):
        with pytest.raises(DataFormatError, match=rf"^{source}, field '{field}': 'someone/prover'"):
            build()


def test_the_retrieval_prover_names_its_generator_argument(here, tmp_path):
    from leanloop.prover.retrieval import RetrievalProver

    with pytest.raises(DataFormatError, match=r"RetrievalProver, field 'gen_ckpt_path': 'out/"):
        RetrievalProver(tmp_path, "out/generator", tmp_path)


def test_a_retrieval_trainer_continuing_its_output_does_not_need_the_start_model(here):
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig

    output = here / "o"
    (output / "0-repo").mkdir(parents=True)
    (output / models.LATEST_FILE).write_text("0-repo\n")
    trainer = RetrievalTrainer(TrainingConfig(model_name="out/gone", output_dir=output))
    assert trainer.output_dir == output
