"""The score of a generated reply (the sum of its tokens' log-probabilities) computed from the
tokens chosen only, as ``generate`` runs: nothing of the vocabulary's width is kept past the step
it belongs to, so a long sample costs what plain ``generate`` costs (``output_scores`` and
``output_logits`` keep every step's full-vocabulary row, and their conversion to float32).

Both recorders are logits processors that change nothing (they return the scores they are given):

- ``ChosenTokenLogprobs`` (sampling, greedy decoding) goes first in the list, so it reads the
  model's own logits before temperature or top-p change them; it keeps one step's
  log-probabilities until the next step shows which token was drawn.
- ``BeamCandidates`` (beam search) keeps, for each beam and step, the few tokens beam search can
  choose among (a beam's continuation is among the best ``keep`` of its own row); the reply's
  score is then read along ``beam_indices``, which ``generate`` returns anyway. It equals
  transformers' own ``sequences_scores`` at ``length_penalty=0``.
"""

from __future__ import annotations

from typing import Any


class ChosenTokenLogprobs:
    """Records each step's log-probability of the token chosen (a logits processor)."""

    def __init__(self) -> None:
        self._pending: Any = None  # the last step's log-probabilities, until its token is known
        self._chosen: list[Any] = []

    def __call__(self, input_ids, scores):
        import torch

        if self._pending is not None:  # the last column of input_ids is the token it chose
            self._chosen.append(self._pending.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self._pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def token_logprobs(self, generated):
        """The log-probability of every generated token, ``(replies, tokens)``.

        Args:
            generated: The generated tokens (the prompt left out), one row a reply.

        Returns:
            A float tensor of ``generated``'s shape.
        """
        import torch

        chosen = list(self._chosen)
        if self._pending is not None and len(chosen) < generated.shape[1]:
            last = generated[:, len(chosen) : len(chosen) + 1]
            chosen.append(self._pending.gather(-1, last).squeeze(-1))
        self._pending = None
        if not chosen:
            return torch.zeros(generated.shape, dtype=torch.float32, device=generated.device)
        return torch.stack(chosen, dim=1)[:, : generated.shape[1]]


class BeamCandidates:
    """Keeps each beam's ``keep`` best log-probabilities per step (a logits processor placed
    last, where beam search's own processed log-probabilities arrive).

    Args:
        keep: Candidates kept per beam and step: what beam search keeps per step
            (``max(2, 1 + end tokens) × beams``).
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._values: list[Any] = []
        self._tokens: list[Any] = []

    def __call__(self, input_ids, scores):
        values, tokens = scores.float().topk(min(self.keep, scores.shape[-1]), dim=-1)
        self._values.append(values)
        self._tokens.append(tokens)
        return scores

    def sequence_scores(self, generated, beam_indices) -> list[float]:
        """Each reply's summed log-probability, read along the beams that made it.

        Args:
            generated: The generated tokens of each reply (the prompt left out).
            beam_indices: ``generate``'s ``beam_indices``: for each reply and step, the beam
                (row of the batch's beams) its token extended; -1 past the reply's end.

        Returns:
            One score per reply.
        """
        import torch

        if not self._values:
            return [0.0] * generated.shape[0]
        steps = min(beam_indices.shape[1], len(self._values), generated.shape[1])
        values = torch.stack(self._values[:steps])  # (steps, beams, keep)
        tokens = torch.stack(self._tokens[:steps])
        rows = beam_indices[:, :steps].long()
        valid = rows >= 0
        at = torch.arange(steps, device=rows.device).unsqueeze(0)  # (1, steps)
        candidate_tokens = tokens[at, rows.clamp(min=0)]  # (replies, steps, keep)
        candidate_values = values[at, rows.clamp(min=0)]
        match = candidate_tokens == generated[:, :steps].unsqueeze(-1)
        token_logprobs = torch.where(match, candidate_values, 0.0).sum(-1)
        return token_logprobs.masked_fill(~valid, 0.0).sum(dim=1).tolist()
