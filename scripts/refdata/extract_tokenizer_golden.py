#!/usr/bin/env python3
"""Copies the tiny-sd-a tokenizer ground truth into tests/data/tiny_tokenizer_golden.json.

Source: ../shared/refdata/tiny-sd-a/golden.h5, datasets tokenizer/prompts (4 UTF-8 strings: an ordinary
prompt, "", a 120-token prompt that gets truncated, and a mixed prompt with case, an apostrophe, a digit,
punctuation, a triple space and "café"), tokenizer/input_ids (4, 77) and tokenizer/ids_untruncated_{i},
made by transformers' slow CLIPTokenizer without ftfy (see that folder's README.md). Only these few ids are
copied; the tiny vocabulary itself lives in text/data/tiny-tokenizer/ (identical to
tiny-sd-a/tokenizer/). The real ViT-L/14 vocabulary and its tokens.h5 are read by the test straight from
../shared/refdata/clip-tokenizer/ and never copied into the repository.

Offline tool:
  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install h5py
  /tmp/venv/bin/python scripts/refdata/extract_tokenizer_golden.py ../shared/refdata tests/data
"""
import json
import os
import sys

import h5py


def main():
    ref, out = sys.argv[1], sys.argv[2]
    with h5py.File(os.path.join(ref, "tiny-sd-a", "golden.h5"), "r") as g:
        t = g["tokenizer"]
        prompts = [p.decode("utf-8") for p in t["prompts"][()]]
        data = {
            "source": {k: str(v) for k, v in g.attrs.items() if k.startswith("version_transformers")},
            "prompts": prompts,
            "input_ids": t["input_ids"][()].tolist(),
            "untruncated": [t[f"ids_untruncated_{i}"][()].tolist() for i in range(len(prompts))],
        }
    with open(os.path.join(out, "tiny_tokenizer_golden.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
