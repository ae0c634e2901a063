"""A tiny transformer that the course trains itself, in numpy, to continue a repeated sequence.

The task: a sequence of random tokens in which a run of tokens is repeated, ``... A B C ... A B C``.
Once the repeat has begun, every next token is known (after ``A`` comes ``B``, as it did before),
and a model can predict it only by looking back for the earlier ``A`` and reading what followed it:
an **induction head** (Olsson et al., 2022). Where the run and its repeat start, and how long they
are, change from sequence to sequence, so no fixed position or offset gives the answer away.

The model is attention only (Elhage et al., 2021): token and position embeddings, two layers of
causal multi-head attention (:func:`qkv.multi_head_attention`), each added to the residual stream,
and an unembedding to one logit per token. No layer norm and no feed-forward layer: every weight
that learns is in the embeddings or in attention.

- :func:`induction_batch`: sequences of the task, and which predictions are determined;
- :func:`initial_model`, :func:`forward`, :func:`backward`: the model before training, its forward
  pass and its gradients (:func:`qkv.multi_head_attention_backward`);
- :func:`train`: Adam on fresh batches, seeded, so that a run repeats exactly on one machine;
- :func:`save` and :func:`load_induction_model`: the weights and the loss curve in one safetensors
  file; the course ships the result of ``training/train_induction.py`` as ``induction.safetensors``;
- :func:`ablate`: the same model with one head removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..attention import causal_mask
from ..backward import linear_backward, multi_head_attention_backward
from ..block import MultiHead
from ..initialisation import lecun_normal
from ..multihead import Head, multi_head_attention
from ..training import Adam, cross_entropy, cross_entropy_backward
from ..validate import shape_str
from .encoder import read_only, read_safetensors

WEIGHTS_FILE = Path(__file__).with_name("induction.safetensors")


@dataclass(frozen=True)
class InductionConfig:
    """Everything a training run depends on; stored in the weights file's metadata."""

    vocab: int = 32  # tokens 0..vocab-1; at least n, since a sequence's tokens are distinct
    n: int = 24  # tokens per sequence
    min_run: int = 4  # the repeated run's length, drawn per sequence from min_run..max_run
    max_run: int = 10
    d_model: int = 32
    num_heads: int = 2
    num_layers: int = 2
    batch: int = 32  # sequences per step, drawn afresh every step
    steps: int = 1000
    learning_rate: float = 3e-3
    seed: int = 0

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads


@dataclass(frozen=True)
class InductionBatch:
    """``tokens`` ``(batch, n)``; ``determined`` ``(batch, n)``: True where the next token is known
    (inside the repeat); ``start`` ``(batch,)``: where the repeat starts; ``run`` ``(batch,)``: its length."""

    tokens: np.ndarray
    determined: np.ndarray
    start: np.ndarray
    run: np.ndarray


def induction_batch(rng: np.random.Generator, config: InductionConfig,
                    batch: int | None = None) -> InductionBatch:
    """Sequences of distinct random tokens, each ending with a copy of a run of its earlier tokens.

    The copy of ``run`` tokens ends the sequence, from ``start = n - run``; the original run lies
    anywhere before it: ``tokens[start + k] = tokens[first + k]``. No other token occurs twice, so
    inside the copy the next token is determined, and nowhere else: the prediction at position
    ``t`` (of token ``t + 1``) is determined when ``t`` and ``t + 1`` both lie in the copy.
    """
    batch = config.batch if batch is None else batch
    n = config.n
    tokens = np.argsort(rng.random((batch, config.vocab)), axis=1)[:, :n]  # (batch, n): distinct tokens
    run = rng.integers(config.min_run, config.max_run + 1, size=batch)  # (batch,)
    start = n - run
    first = (rng.random(batch) * (start - run + 1)).astype(int)  # 0 .. start - run
    copy = np.arange(n)[None, :] >= start[:, None]  # (batch, n): True inside the copy
    source = np.where(copy, first[:, None] + np.arange(n)[None, :] - start[:, None], np.arange(n)[None, :])
    tokens = np.take_along_axis(tokens, source, axis=1)  # the copy reads the original run
    determined = copy.copy()
    determined[:, -1] = False  # the last token predicts nothing in the sequence
    return InductionBatch(tokens, determined, start, run)


@dataclass(frozen=True, eq=False)
class InductionModel:
    """An attention-only transformer: ``embedding`` ``(vocab, d_model)``, ``positions`` ``(n, d_model)``,
    ``layers`` (one :class:`qkv.MultiHead` each, causal), ``unembedding`` ``(d_model, vocab)``."""

    embedding: np.ndarray
    positions: np.ndarray
    layers: tuple[MultiHead, ...]
    unembedding: np.ndarray

    def parameters(self) -> dict[str, np.ndarray]:
        """Every learned array by name: ``embedding``, ``layer1.head2.W_Q``, ``layer2.W_O``, ..."""
        named = {"embedding": self.embedding, "positions": self.positions, "unembedding": self.unembedding}
        for l, layer in enumerate(self.layers, start=1):
            for i, head in enumerate(layer.heads, start=1):
                for role in ("W_Q", "W_K", "W_V"):
                    named[f"layer{l}.head{i}.{role}"] = getattr(head, role)
            named[f"layer{l}.W_O"] = layer.W_O
        return named

    @classmethod
    def from_parameters(cls, named: dict[str, np.ndarray]) -> "InductionModel":
        """The inverse of :meth:`parameters`."""
        layers = []
        l = 1
        while f"layer{l}.W_O" in named:
            heads, i = [], 1
            while f"layer{l}.head{i}.W_Q" in named:
                heads.append(Head(*(named[f"layer{l}.head{i}.{role}"] for role in ("W_Q", "W_K", "W_V"))))
                i += 1
            layers.append(MultiHead(tuple(heads), named[f"layer{l}.W_O"]))
            l += 1
        return cls(read_only(named["embedding"]), read_only(named["positions"]), tuple(layers),
                   read_only(named["unembedding"]))

    @property
    def vocab(self) -> int:
        return self.embedding.shape[0]

    @property
    def n(self) -> int:
        return self.positions.shape[0]


def initial_model(config: InductionConfig) -> InductionModel:
    """The model before training: every matrix drawn with :func:`qkv.lecun_normal` from ``config.seed``,
    the embeddings with variance 1 per entry."""
    rng = np.random.default_rng([config.seed, 0])
    d, d_k = config.d_model, config.d_k
    embedding = rng.normal(size=(config.vocab, d))
    positions = rng.normal(size=(config.n, d))
    layers = []
    for _ in range(config.num_layers):
        heads = [Head(lecun_normal(d, d_k, rng), lecun_normal(d, d_k, rng), lecun_normal(d, d_k, rng))
                 for _ in range(config.num_heads)]
        layers.append(MultiHead(tuple(heads), lecun_normal(config.num_heads * d_k, d, rng)))
    return InductionModel(embedding, positions, tuple(layers), lecun_normal(d, config.vocab, rng))


@dataclass(frozen=True)
class ForwardPass:
    """``residuals`` ``(L + 1, ..., n, d_model)`` (the embeddings, then after each layer);
    ``weights`` ``(L, ..., h, n, n)``; ``logits`` ``(..., n, vocab)``."""

    residuals: np.ndarray
    weights: np.ndarray
    logits: np.ndarray


def forward(model: InductionModel, tokens) -> ForwardPass:
    r"""Run the model on ``tokens`` ``(..., n)``.

    .. math::
        X_0 = E[\text{tokens}] + P,

        X_l = X_{l-1} + \mathrm{MultiHead}_l(X_{l-1}) \ \text{(causal)},

        \text{logits} = X_L\, U
    """
    tokens = _check_tokens(tokens, model)
    n = tokens.shape[-1]
    X = model.embedding[tokens] + model.positions[:n]  # (..., n, d_model)
    mask = causal_mask(n)
    residuals, weights = [X], []
    for layer in model.layers:
        # (..., n, d_model) and (..., h, n, n)
        attended, layer_weights = multi_head_attention(X, *layer, mask=mask)
        X = X + attended  # the residual stream
        residuals.append(X)
        weights.append(layer_weights)
    logits = X @ model.unembedding  # (..., n, vocab)
    return ForwardPass(np.stack(residuals), np.stack(weights), logits)


def _check_tokens(tokens, model: InductionModel) -> np.ndarray:
    tokens = np.asarray(tokens)
    if tokens.dtype.kind not in "iu" or tokens.ndim < 1:
        raise ValueError(f"tokens must be whole numbers of shape (..., n), "
                         f"got {tokens.dtype} {shape_str(tokens.shape)}")
    if tokens.shape[-1] > model.n:
        raise ValueError(f"the model has {model.n} positions but the sequence has {tokens.shape[-1]} tokens")
    if tokens.min() < 0 or tokens.max() >= model.vocab:
        raise ValueError(f"tokens must lie in 0..{model.vocab - 1}, got {tokens.min()}..{tokens.max()}")
    return tokens


def loss(model: InductionModel, batch: InductionBatch) -> float:
    """The cross-entropy of the predictions that the task determines (inside the repeat)."""
    logits = forward(model, batch.tokens).logits[:, :-1]  # (batch, n - 1, vocab): token t predicts t + 1
    return cross_entropy(logits, batch.tokens[:, 1:], batch.determined[:, :-1])


def backward(model: InductionModel, batch: InductionBatch):
    """The loss of :func:`loss` and its gradient at every parameter, named as
    :meth:`InductionModel.parameters` names them: ``(loss, {name: gradient})``."""
    run = forward(model, batch.tokens)
    logits = run.logits[:, :-1]  # (batch, n - 1, vocab): token t predicts t + 1
    targets, counted = batch.tokens[:, 1:], batch.determined[:, :-1]
    value = cross_entropy(logits, targets, counted)
    d_logits = np.zeros_like(run.logits)  # (batch, n, vocab)
    d_logits[:, :-1] = cross_entropy_backward(logits, targets, counted)
    # 1) the unembedding, logits = X_L U
    dX, d_U, _ = linear_backward(run.residuals[-1], model.unembedding, d_logits)
    gradients = {"unembedding": d_U}
    mask = causal_mask(batch.tokens.shape[-1])
    # 2) each layer, from the top: X_l = X_(l-1) + MultiHead_l(X_(l-1))
    for l in range(len(model.layers), 0, -1):
        d_input, layer_gradients = multi_head_attention_backward(
            run.residuals[l - 1], dX, *model.layers[l - 1], mask=mask)
        dX = dX + d_input  # the residual passes dX down; attention adds its share
        for i, head in enumerate(layer_gradients.heads, start=1):
            for role in ("W_Q", "W_K", "W_V"):
                gradients[f"layer{l}.head{i}.{role}"] = getattr(head, role)
        gradients[f"layer{l}.W_O"] = layer_gradients.W_O
    # 3) the embeddings, X_0 = one_hot(tokens) E + P: each use of a token adds
    one_hot = np.eye(model.vocab)[batch.tokens]  # (batch, n, vocab)
    _, gradients["embedding"], _ = linear_backward(one_hot, model.embedding, dX)
    d_positions = np.zeros_like(model.positions)
    d_positions[:batch.tokens.shape[-1]] = dX.sum(axis=0)
    gradients["positions"] = d_positions
    return value, gradients


@dataclass(frozen=True, eq=False)
class TrainingRun:
    """A trained model, its configuration, the loss of every step (``losses`` ``(steps,)``) and, when
    known, the CPU time the training took (``cpu_seconds``, on the machine that ran it)."""

    model: InductionModel
    config: InductionConfig
    losses: np.ndarray
    cpu_seconds: float | None = None


def train(config: InductionConfig = InductionConfig(), *, steps: int | None = None,
          progress: Callable[[int, float], None] | None = None) -> TrainingRun:
    """Train :func:`initial_model` with :class:`qkv.Adam` on fresh batches of :func:`induction_batch`.

    Every random draw comes from ``config.seed``, so the same configuration gives the same weights
    on one machine; ``steps`` stops early (the tests train a few steps). ``progress(step, loss)`` is
    called after every step.
    """
    steps = config.steps if steps is None else steps
    rng = np.random.default_rng([config.seed, 1])
    model = initial_model(config)
    parameters = model.parameters()
    adam = Adam(learning_rate=config.learning_rate)
    losses = np.zeros(steps)
    for step in range(steps):
        value, gradients = backward(model, induction_batch(rng, config))
        parameters = adam.update(parameters, gradients)
        model = InductionModel.from_parameters(parameters)
        losses[step] = value
        if progress is not None:
            progress(step, value)
    return TrainingRun(model, config, losses)


def save(run: TrainingRun, path) -> None:
    """Write the weights, the loss curve and the configuration to one safetensors file."""
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(array) for name, array in run.model.parameters().items()}
    tensors["losses"] = run.losses
    metadata = {"config": json.dumps(asdict(run.config), sort_keys=True)}
    if run.cpu_seconds is not None:
        metadata["training_cpu_seconds"] = f"{run.cpu_seconds:.1f}"
    save_file(tensors, str(path), metadata=metadata)


def load_induction_model(path=WEIGHTS_FILE) -> TrainingRun:
    """The trained model that ships with the course (or the file at ``path``)."""
    tensors, metadata = read_safetensors(path)
    config = InductionConfig(**json.loads(metadata["config"]))
    losses = read_only(tensors.pop("losses"))
    cpu_seconds = float(metadata["training_cpu_seconds"]) if "training_cpu_seconds" in metadata else None
    return TrainingRun(InductionModel.from_parameters(tensors), config, losses, cpu_seconds)


def ablate(model: InductionModel, layer: int, head: int) -> InductionModel:
    """The model with head ``head`` of layer ``layer`` (both counted from 1) removed: the rows of
    ``W_O`` that carry its output are set to 0, so it adds nothing to the residual stream."""
    attention = model.layers[layer - 1]
    rows = np.arange(attention.W_O.shape[0]).reshape(attention.num_heads, -1)[head - 1]
    W_O = np.array(attention.W_O)
    W_O[rows] = 0.0
    layers = list(model.layers)
    layers[layer - 1] = MultiHead(attention.heads, W_O, attention.b_O)
    return replace(model, layers=tuple(layers))
