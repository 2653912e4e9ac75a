"""The acceptance classifier (numpy only; re-implemented identically in C++).

Input: an RGB image, uint8 [H, W, 3] (H, W >= 5), values 0..255.
Palette: data.COLOURS / data.PALETTE (order red, green, blue, yellow, white,
black; ties in "nearest" go to the earlier palette entry).

 1. background: the outer 2-pixel ring (rows 0, 1, H-2, H-1 and columns 0, 1,
    W-2, W-1; each pixel once) -> per-channel median (numpy median: the mean
    of the two middle values for an even count) -> nearest palette colour by
    Euclidean RGB distance. Call its palette RGB B.
 2. foreground mask: pixels whose Euclidean RGB distance to B is greater than
    FG_THRESHOLD = 127.5 (half the smallest distance between two palette
    colours, 255).
 3. empty mask -> shape "none", colour "none" (always wrong).
 4. shape colour: per-channel median of the mask pixels -> nearest palette
    colour.
 5. shape: the mask is compared with each shape drawn to fill the mask's
    bounding box (x0..x1, y0..y1 inclusive; w = x1 - x0 + 1, h = y1 - y0 + 1,
    pixel centres (x + 0.5, y + 0.5), centre cx = x0 + w/2, cy = y0 + h/2):
      square    every pixel of the box
      circle    ((px - cx) / (w/2))^2 + ((py - cy) / (h/2))^2 <= 1
      triangle  apex up: 0 <= py - y0 <= h and |px - cx| <= (py - y0) / h * w/2
    by intersection over union of pixel sets; the shape is the best match
    (ties to the earlier of circle, square, triangle). No threshold: a
    square with rounded corners is still nearer the box than the ellipse,
    a lumpy circle nearer the ellipse than the triangle. (Clean data:
    900/900. The fill mask / box is reported for information.)
"""
import numpy as np

from data import COLOURS, PALETTE_RGB

FG_THRESHOLD = 127.5
SHAPE_ORDER = ["circle", "square", "triangle"]  # ties go to the earlier


def templates(x0, x1, y0, y1, h_img, w_img):
    """The three shapes drawn to fill the box, as boolean [h_img, w_img] masks."""
    w, h = x1 - x0 + 1, y1 - y0 + 1
    cx, cy = x0 + w / 2.0, y0 + h / 2.0
    yy, xx = np.mgrid[0:h_img, 0:w_img].astype(np.float64) + 0.5
    box = (xx >= x0) & (xx <= x1 + 1) & (yy >= y0) & (yy <= y1 + 1)
    circle = ((xx - cx) / (w / 2.0)) ** 2 + ((yy - cy) / (h / 2.0)) ** 2 <= 1.0
    depth = yy - y0
    triangle = (depth >= 0) & (depth <= h) & (np.abs(xx - cx) <= depth / h * (w / 2.0))
    return {"circle": circle, "square": box, "triangle": triangle}


def nearest_colour(rgb):
    d = ((PALETTE_RGB - np.asarray(rgb, np.float64)[None, :]) ** 2).sum(axis=1)
    return COLOURS[int(np.argmin(d))]  # argmin: first of equal distances


def classify(img):
    """img: uint8 [H, W, 3]. Returns dict(shape, shape_colour, background, fill)."""
    a = np.asarray(img).astype(np.float64)
    h, w, _ = a.shape
    ring = np.zeros((h, w), bool)
    ring[:2, :] = ring[-2:, :] = True
    ring[:, :2] = ring[:, -2:] = True
    bg = nearest_colour(np.median(a[ring], axis=0))
    b = PALETTE_RGB[COLOURS.index(bg)]
    mask = np.sqrt(((a - b[None, None, :]) ** 2).sum(axis=2)) > FG_THRESHOLD
    n = int(mask.sum())
    if n == 0:
        return {"shape": "none", "shape_colour": "none", "background": bg, "fill": 0.0}
    fg = nearest_colour(np.median(a[mask], axis=0))
    ys, xs = np.nonzero(mask)
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    fill = n / float((x1 - x0 + 1) * (y1 - y0 + 1))
    best, shape = -1.0, None
    for name, t in templates(x0, x1, y0, y1, h, w).items():
        iou = (mask & t).sum() / float((mask | t).sum())
        if iou > best:
            best, shape = iou, name
    return {"shape": shape, "shape_colour": fg, "background": bg, "fill": fill}


def correct(result, label):
    """label: (shape, shape_colour, background_colour)."""
    return (result["shape"], result["shape_colour"], result["background"]) == tuple(label)
