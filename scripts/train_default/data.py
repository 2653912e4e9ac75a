"""Synthetic data for the tpumesh default model: one coloured shape on a
uniformly coloured 32x32 background, and its caption.

Everything here is numpy only and deterministic from the seeds given.

Image definition (pixel (x, y) has its centre at (x + 0.5, y + 0.5); y down):
  size s      integer, uniform in [SIZE_MIN, SIZE_MAX] (side of the square,
              diameter of the circle, base width = height of the triangle)
  centre      (16 + jx, 16 + jy), jx, jy integers uniform in [-JITTER, JITTER]
  square      |px - cx| < s/2 and |py - cy| < s/2          (exactly s*s pixels)
  circle      (px - cx)^2 + (py - cy)^2 <= (s/2)^2
  triangle    apex (cx, cy - s/2), base y = cy + s/2 from cx - s/2 to cx + s/2:
              cy - s/2 <= py <= cy + s/2 and |px - cx| <= (py - (cy - s/2)) / 2
  no anti-aliasing: every pixel is exactly the shape or background palette RGB.
The shape always lies inside pixels [2, 29], so the outer 2-pixel ring is
pure background.
"""
import numpy as np

IMAGE_SIZE = 32
SIZE_MIN, SIZE_MAX = 14, 22
JITTER = 3
SHAPES = ["circle", "square", "triangle"]
COLOURS = ["red", "green", "blue", "yellow", "white", "black"]
PALETTE = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "white": (255, 255, 255),
    "black": (0, 0, 0),
}
PALETTE_RGB = np.array([PALETTE[c] for c in COLOURS], dtype=np.float64)  # [6, 3], COLOURS order
GRAMMAR = "a {shape_colour} {shape} on a {background_colour} background"
WORDS = ["a", "on", "background"] + COLOURS + SHAPES  # every word of the grammar


def caption(shape, shape_colour, background_colour):
    return GRAMMAR.format(shape=shape, shape_colour=shape_colour, background_colour=background_colour)


def all_triples():
    """The 90 (shape, shape_colour, background_colour) triples, in a fixed order."""
    return [(s, f, b) for s in SHAPES for f in COLOURS for b in COLOURS if f != b]


def eval_prompts():
    """16 evaluation triples: all 3 shapes, all 6 colours as shape colour and as
    background colour, every shape in several colours.
      i = 0..15: shape_colour = COLOURS[i % 6],
                 background   = COLOURS[(i % 6 + 1 + (i // 6)) % 6],
                 shape        = SHAPES[(i + i // 6) % 3]."""
    out = []
    for i in range(16):
        f = COLOURS[i % 6]
        b = COLOURS[(i % 6 + 1 + i // 6) % 6]
        s = SHAPES[(i + i // 6) % 3]
        out.append((s, f, b))
    return out


_YY, _XX = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float64) + 0.5


def shape_mask(shape, size, cx, cy):
    h = size / 2.0
    dx, dy = _XX - cx, _YY - cy
    if shape == "square":
        return (np.abs(dx) < h) & (np.abs(dy) < h)
    if shape == "circle":
        return dx * dx + dy * dy <= h * h
    if shape == "triangle":
        depth = _YY - (cy - h)  # 0 at the apex, size at the base
        return (depth >= 0) & (depth <= size) & (np.abs(dx) <= depth / 2.0)
    raise ValueError(shape)


def render(shape, shape_colour, background_colour, size, jx, jy):
    """uint8 [32, 32, 3]."""
    img = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    img[:] = PALETTE[background_colour]
    img[shape_mask(shape, size, IMAGE_SIZE / 2 + jx, IMAGE_SIZE / 2 + jy)] = PALETTE[shape_colour]
    return img


def sample_params(rng, n):
    """n random draws: (triple index into all_triples(), size, jx, jy), uniform."""
    triples = rng.integers(0, 90, size=n)
    sizes = rng.integers(SIZE_MIN, SIZE_MAX + 1, size=n)
    jx = rng.integers(-JITTER, JITTER + 1, size=n)
    jy = rng.integers(-JITTER, JITTER + 1, size=n)
    return triples, sizes, jx, jy


def make_dataset(seed, n):
    """Deterministic dataset: (uint8 images [n, 32, 32, 3], captions, labels)
    where labels[i] = (shape, shape_colour, background_colour)."""
    rng = np.random.default_rng(seed)
    triples, sizes, jx, jy = sample_params(rng, n)
    tri = all_triples()
    imgs = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    labels, caps = [], []
    for i in range(n):
        s, f, b = tri[triples[i]]
        imgs[i] = render(s, f, b, int(sizes[i]), int(jx[i]), int(jy[i]))
        labels.append((s, f, b))
        caps.append(caption(s, f, b))
    return imgs, caps, labels


def generator_settings():
    return {
        "image_size": IMAGE_SIZE,
        "shapes": SHAPES,
        "colours": COLOURS,
        "palette_rgb": {c: list(PALETTE[c]) for c in COLOURS},
        "size_px": [SIZE_MIN, SIZE_MAX],
        "size_distribution": "integer, uniform inclusive; side (square), diameter (circle), base=height (triangle)",
        "centre": "(16 + jx, 16 + jy), jx, jy integers uniform in [-3, 3]",
        "jitter_px": JITTER,
        "anti_aliasing": "none (pixel-centre sampling)",
        "grammar": GRAMMAR,
        "shape_colour_ne_background": True,
        "num_captions": len(all_triples()),
        "vocabulary_words": WORDS,
        "sampling": "numpy default_rng(seed): triple index (90), size, jx, jy drawn as integer vectors in that order",
    }
