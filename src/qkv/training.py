"""What training adds to a forward and a backward pass: a loss to lower, and a rule that moves the
parameters downhill.

- :func:`cross_entropy` and :func:`cross_entropy_backward`: the loss of a model that predicts the
  next token, and its gradient at the logits (where backpropagation starts).
- :class:`Adam`: the update rule that almost every transformer is trained with (Kingma and Ba,
  2015), in numpy.

Parameters travel as a dict ``{name: array}``, and their gradients as a dict with the same names and
shapes; :mod:`qkv.models.induction` trains a tiny transformer with both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .attention import softmax
from .validate import as_positive_number, as_real_array, shape_str


def _check_targets(logits, targets, counted):
    logits = as_real_array("logits", logits, min_ndim=1)
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu" or targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must be whole numbers of shape {shape_str(logits.shape[:-1])} "
                         f"(one per row of logits {shape_str(logits.shape)}), got {targets.dtype} "
                         f"{shape_str(targets.shape)}")
    if targets.size and (targets.min() < 0 or targets.max() >= logits.shape[-1]):
        raise ValueError(f"targets must lie in 0..{logits.shape[-1] - 1} (one logit each), "
                         f"got {targets.min()}..{targets.max()}")
    counted = np.ones(targets.shape, dtype=bool) if counted is None else np.asarray(counted)
    if counted.dtype != np.bool_ or counted.shape != targets.shape or not counted.any():
        raise ValueError(f"counted must be a boolean array of shape {shape_str(targets.shape)} with at least "
                         "one True (the predictions the loss counts)")
    return logits, targets, counted


def cross_entropy(logits, targets, counted=None) -> float:
    r"""The average of :math:`-\log p(\text{target})` over the counted predictions.

    .. math::
        p = \mathrm{softmax}(z), \qquad
        L = \frac{1}{|C|} \sum_{t \in C} -\log p_t[y_t]

    A model that guesses uniformly over ``V`` tokens scores :math:`\log V`; one that is always
    sure and right scores 0.

    Args:
        logits: ``z``, shape ``(..., V)``: one score per token of the vocabulary, per prediction.
        targets: ``y``, whole numbers in ``0..V-1``, shape ``(...)``.
        counted: optional boolean ``(...)``: which predictions the loss counts (``C``); all if None.

    Returns:
        The loss, a float.

    Raises:
        ValueError: if the shapes do not fit, a target is out of range or nothing is counted.
    """
    logits, targets, counted = _check_targets(logits, targets, counted)
    shifted = logits - logits.max(axis=-1, keepdims=True)  # (..., V), every entry <= 0
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (..., V)
    on_target = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]  # (...)
    return float(-on_target[counted].mean())


def cross_entropy_backward(logits, targets, counted=None) -> np.ndarray:
    r"""The gradient of :func:`cross_entropy` at the logits.

    .. math::
        \frac{\partial L}{\partial z_t} = \frac{1}{|C|}\big(p_t - \mathrm{onehot}(y_t)\big)
        \ \text{for } t \in C, \qquad 0 \text{ otherwise}

    Returns:
        ``dz``, shaped like ``logits``.
    """
    logits, targets, counted = _check_targets(logits, targets, counted)
    dz = softmax(logits, axis=-1)  # (..., V)
    on_target = np.take_along_axis(dz, targets[..., None], axis=-1)  # (..., 1): p of the target
    np.put_along_axis(dz, targets[..., None], on_target - 1, axis=-1)
    return dz * (counted / counted.sum())[..., None]


@dataclass
class Adam:
    r"""Adam: a step against each gradient, scaled by that entry's own recent gradients.

    .. math::
        m \leftarrow \beta_1 m + (1 - \beta_1)\, g, \qquad
        v \leftarrow \beta_2 v + (1 - \beta_2)\, g^2,

        \theta \leftarrow \theta - \eta\, \frac{m / (1 - \beta_1^t)}{\sqrt{v / (1 - \beta_2^t)} + \varepsilon}

    ``m`` is a running mean of the gradient, ``v`` of its square, both per entry; dividing them by
    ``1 - beta^t`` undoes their start at 0. Each entry then moves by about ``learning_rate`` at most,
    whatever the scale of its gradient.

    Usage: ``adam = Adam(learning_rate=3e-3)``; then, once per step,
    ``parameters = adam.update(parameters, gradients)`` (dicts of arrays with the same names).
    """

    learning_rate: float = 1e-3
    beta_1: float = 0.9
    beta_2: float = 0.999
    eps: float = 1e-8
    steps: int = 0
    m: dict = field(default_factory=dict)
    v: dict = field(default_factory=dict)

    def __post_init__(self):
        self.learning_rate = as_positive_number("learning_rate", self.learning_rate)
        for name in ("beta_1", "beta_2"):
            beta = getattr(self, name)
            if not 0 <= beta < 1:
                raise ValueError(f"Adam's {name} must lie in [0, 1), got {beta!r}")

    def update(self, parameters: dict, gradients: dict) -> dict:
        """The parameters after one step; the moments ``m`` and ``v`` are updated
        in place.

        Raises:
            ValueError: if the gradients do not name the same arrays, in the same
                shapes.
        """
        if set(parameters) != set(gradients):
            odd = sorted(set(gradients) ^ set(parameters))
            raise ValueError(f"gradients for {odd} without their parameter (or the "
                             "other way round); each parameter needs one gradient")
        self.steps += 1
        moved = {}
        for name, theta in parameters.items():
            g = np.asarray(gradients[name], dtype=float)
            if g.shape != np.shape(theta):
                raise ValueError(
                    f"the gradient of {name} has shape {shape_str(g.shape)} "
                    f"but {name} has {shape_str(np.shape(theta))}")
            m = self.beta_1 * self.m.get(name, 0.0) + (1 - self.beta_1) * g
            v = self.beta_2 * self.v.get(name, 0.0) + (1 - self.beta_2) * g * g
            self.m[name], self.v[name] = m, v
            m_hat = m / (1 - self.beta_1 ** self.steps)  # undo the start at 0
            v_hat = v / (1 - self.beta_2 ** self.steps)
            step = self.learning_rate * m_hat / (np.sqrt(v_hat) + self.eps)
            moved[name] = theta - step
        return moved
