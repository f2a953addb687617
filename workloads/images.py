"""JPEG samples for the PyTorch DataLoader: decode with Pillow, random-resized-crop, flip.

The same steps as the DALI pipeline (workloads/dali_loader.py), with the same default
ranges as torchvision's RandomResizedCrop (area 8-100%, aspect 3/4-4/3) and a horizontal
flip half the time. Pillow, not torchvision: Pillow is already a dependency, and crop +
resize is one `Image.resize(box=...)` call. The random numbers come from Python's
`random`, which the DataLoader seeds differently in every worker.
"""
from __future__ import annotations

import io
import math
import random
from typing import Tuple

import numpy as np
from PIL import Image

SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)


def crop_box(width: int, height: int, rng: random.Random) -> Tuple[int, int, int, int]:
    """(left, top, right, bottom) of a random crop, as torchvision's RandomResizedCrop.get_params."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(math.log(RATIO[0]), math.log(RATIO[1])))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            left, top = rng.randint(0, width - w), rng.randint(0, height - h)
            return left, top, left + w, top + h
    side = min(width, height)            # fall back to the central square
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def decode(jpeg: bytes) -> Image.Image:
    return Image.open(io.BytesIO(jpeg)).convert("RGB")


def augment(image: Image.Image, crop_size: int, rng: random.Random = random) -> Image.Image:
    """Random-resized-crop to crop_size x crop_size, then a horizontal flip half the time."""
    box = crop_box(image.width, image.height, rng)
    out = image.resize((crop_size, crop_size), Image.BILINEAR, box=box)
    return out.transpose(Image.FLIP_LEFT_RIGHT) if rng.random() < 0.5 else out


def jpeg_to_array(jpeg: bytes, crop_size: int, do_augment: bool) -> np.ndarray:
    """HWC uint8, as DALI's decoder gives it."""
    image = decode(jpeg)
    return np.array(augment(image, crop_size) if do_augment else image)   # a writable copy, for torch
