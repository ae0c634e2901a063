"""Train the course's tiny attention-only transformer on the induction task, in numpy only.

    .venv/bin/python training/train_induction.py          # writes src/qkv/models/induction.safetensors
    .venv/bin/python training/train_induction.py --out /tmp/induction.safetensors --steps 200

Everything that trains is in ``qkv``: the model, its forward and backward passes and the task in
:mod:`qkv.models.induction`, the loss and Adam in :mod:`qkv.training`, the backward pass of attention
in :mod:`qkv.backward`. This script runs :func:`qkv.models.induction.train` with the default
configuration, prints the loss as it falls, and saves the weights with the loss of every step, so
that the book only loads them. No PyTorch: the gradients are the course's own.

The run is seeded and uses one BLAS thread, so on one machine it repeats bit for bit. Another CPU
or BLAS build may round a sum differently; the tests retrain and compare with the shipped file
within a stated tolerance (see ``tests/test_models_induction.py``).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from threadpoolctl import threadpool_limits

from qkv.models import induction

DEFAULT_OUT = induction.WEIGHTS_FILE


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the safetensors file to write")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"training steps (default {induction.InductionConfig().steps})")
    args = parser.parse_args(argv)
    config = induction.InductionConfig()
    if args.steps is not None:
        config = replace(config, steps=args.steps)

    def report(step: int, loss: float) -> None:
        if step % 100 == 0 or step == config.steps - 1:
            print(f"step {step:5d}  loss {loss:.4f}", flush=True)

    started, started_cpu = time.perf_counter(), time.process_time()
    with threadpool_limits(limits=1, user_api="blas"):
        run = induction.train(config, progress=report)
    # CPU time, not wall time: on a shared machine the wall time says more about the neighbours
    cpu_seconds = time.process_time() - started_cpu
    induction.save(replace(run, cpu_seconds=cpu_seconds), args.out)
    print(f"trained {config.steps} steps in {cpu_seconds:.1f} s of CPU time "
          f"({time.perf_counter() - started:.1f} s on the clock); wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
