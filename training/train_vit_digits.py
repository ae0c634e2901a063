"""Train the course's small Vision Transformer on scikit-learn's 8x8 digits, with PyTorch.

    .venv/bin/python training/train_vit_digits.py            # writes src/qkv/models/vit_digits.safetensors
    .venv/bin/python training/train_vit_digits.py --out /tmp/vit.safetensors --epochs 5

No pretrained ViT ships in a package, so the course trains its own: 8x8 images cut into 2x2
patches (a 4x4 grid of 16 patch tokens), a class token, learned position embeddings and three
pre-norm encoder layers of 4 heads (PyTorch's ``nn.TransformerEncoderLayer``). The run is seeded
and single-threaded, so it repeats. The images come from scikit-learn (the data set ships inside
the package; nothing is downloaded).

The output is one safetensors file, in PyTorch's parameter names, that the course reads with
``qkv.models.load_vit_digits`` and runs with numpy: the weights, the indices of the held-out images
(``held_out_indices``, never seen in training), and the settings in the file's metadata. The
held-out accuracy is printed; the tests measure it again with the numpy forward pass.

This script lives outside ``src/qkv`` because it uses PyTorch, which ``qkv`` never imports; ``bench/``
holds speed measurements, not training.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "src" / "qkv" / "models" / "vit_digits.safetensors"

# The architecture. The numpy side reads these from the file's metadata.
CONFIG = {
    "image_size": 8,
    "patch_size": 2,
    "d_model": 64,
    "num_heads": 4,
    "num_layers": 3,
    "d_ff": 128,
    "num_classes": 10,
    "layer_norm_eps": 1e-6,
    "pixel_scale": 16.0,  # digits' pixels run from 0 to 16; the model reads pixel / 16
}
SEED = 0
HELD_OUT_FRACTION = 0.2


class DigitsViT(nn.Module):
    """Patches -> linear patch embedding, a class token in front, position embeddings, pre-norm
    encoder layers, a final LayerNorm, and a linear classifier on the class token's vector."""

    def __init__(self, image_size, patch_size, d_model, num_heads, num_layers, d_ff, num_classes,
                 layer_norm_eps, dropout=0.1, **_):
        super().__init__()
        self.patch_size = patch_size
        num_patches = (image_size // patch_size) ** 2
        self.patch_embedding = nn.Linear(patch_size * patch_size, d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.position_embedding = nn.Parameter(torch.randn(1, num_patches + 1, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=dropout, activation="gelu",
                                           layer_norm_eps=layer_norm_eps, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.classifier = nn.Linear(d_model, num_classes)

    def patches(self, images):
        """(batch, H, W) -> (batch, N, P*P), patches numbered row by row (as qkv.patchify)."""
        b, height, width = images.shape
        p = self.patch_size
        grid = images.reshape(b, height // p, p, width // p, p).transpose(2, 3)  # (b, rows, cols, P, P)
        return grid.reshape(b, -1, p * p)

    def forward(self, images):
        tokens = self.patch_embedding(self.patches(images))  # (b, N, d_model)
        cls = self.class_token.expand(len(images), -1, -1)  # (b, 1, d_model)
        x = torch.cat([cls, tokens], dim=1) + self.position_embedding  # (b, N + 1, d_model)
        x = self.norm(self.encoder(x))
        return self.classifier(x[:, 0])  # (b, num_classes)


def digits_split(seed=SEED):
    """Images scaled to 0..1, labels, and the indices of the training and held-out images."""
    digits = load_digits()
    images = digits.images.astype(np.float32) / CONFIG["pixel_scale"]  # (1797, 8, 8)
    train, held_out = train_test_split(np.arange(len(images)), test_size=HELD_OUT_FRACTION,
                                       random_state=seed, stratify=digits.target)
    return images, digits.target, np.sort(train), np.sort(held_out)


def shift(images, generator):
    """Augmentation: move every image by up to one pixel in each direction (zeros come in)."""
    padded = nn.functional.pad(images, (1, 1, 1, 1))
    dy, dx = torch.randint(0, 3, (2,), generator=generator).tolist()
    return padded[:, dy:dy + images.shape[1], dx:dx + images.shape[2]]


def accuracy(model, images, labels):
    model.eval()
    with torch.no_grad():
        return float((model(images).argmax(dim=1) == labels).float().mean())


def train(epochs=200, batch_size=64, learning_rate=2e-3, weight_decay=0.05, seed=SEED):
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    images, labels, train_idx, held_out_idx = digits_split(seed)
    x_train, y_train = torch.tensor(images[train_idx]), torch.tensor(labels[train_idx])
    x_test, y_test = torch.tensor(images[held_out_idx]), torch.tensor(labels[held_out_idx])

    model = DigitsViT(**CONFIG)
    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(x_train) / batch_size)
    total = epochs * steps_per_epoch
    warmup = 5 * steps_per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))
    generator = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        for start in range(0, len(x_train), batch_size):
            batch = order[start:start + batch_size]
            loss = loss_fn(model(shift(x_train[batch], generator)), y_train[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
        if (epoch + 1) % 20 == 0 or epoch + 1 == epochs:
            print(f"epoch {epoch + 1:4d}  loss {loss.item():.3f}  "
                  f"train {accuracy(model, x_train, y_train):.4f}  held-out {accuracy(model, x_test, y_test):.4f}",
                  flush=True)
    return model, held_out_idx, accuracy(model, x_test, y_test)


def save(model, held_out_idx, path, held_out_accuracy):
    tensors = {name: value.detach().contiguous() for name, value in model.state_dict().items()}
    tensors["held_out_indices"] = torch.tensor(held_out_idx, dtype=torch.int64)
    metadata = {key: str(value) for key, value in CONFIG.items()}
    metadata.update({"seed": str(SEED), "held_out_fraction": str(HELD_OUT_FRACTION),
                     "held_out_accuracy_pytorch": f"{held_out_accuracy:.6f}",
                     "data": "sklearn.datasets.load_digits", "trained_with": f"torch {torch.__version__}"})
    save_file(tensors, str(path), metadata=metadata)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    model, held_out_idx, held_out_accuracy = train(epochs=args.epochs)
    save(model, held_out_idx, args.out, held_out_accuracy)
    size = args.out.stat().st_size
    print(f"held-out accuracy {held_out_accuracy:.4f} on {len(held_out_idx)} images; "
          f"wrote {args.out.name} ({size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
