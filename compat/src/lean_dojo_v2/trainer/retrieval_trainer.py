"""``lean_dojo_v2.trainer.retrieval_trainer``: ``RetrievalTrainer`` is leanloop's
(``leanloop.trainer.retrieval.RetrievalTrainer``): ``RetrievalTrainer(config=TrainingConfig())``,
``train(repos, database, data_path=None, model_checkpoint_path=None)`` (``data_path`` defaults to
``<output_dir>/data``) and ``evaluate(dataset_path=None)``, which returns R@1, R@10 and MRR."""

from __future__ import annotations

from leanloop.trainer.retrieval import RetrievalTrainer

__all__ = ["RetrievalTrainer"]
